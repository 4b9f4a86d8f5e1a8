"""SR and SEG exports of a source without its Type 2 Patient and Study attributes (birth date, sex, name, ID,
study date and time, referring physician, study ID, accession): written with them empty, accepted by dciodvfy,
never an HTTP 500; a source without an attribute DICOM requires (Type 1) is refused by name, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pydicom
import pytest

from copilot.runtime import open_session
from copilot.session import Session
from copilot.tools.dicom_required import TYPE2
from tests.dicom_validator import assert_valid_dicom


def _session(tmp_path: Path, drop: tuple[str, ...]) -> Session:
    """A Track B session on a CT series whose files lack `drop`, with a key slice, a point and a segment."""
    from tests.test_adapters import _dicom_series

    case = tmp_path / "case"
    _dicom_series(case / "images" / "ct", 4, "CT", 0.0, 2.5)
    for f in (case / "images" / "ct").iterdir():
        ds = pydicom.dcmread(f)
        for key in drop:
            if key in ds:
                delattr(ds, key)
        ds.save_as(f)
    (case / "case.json").write_text(
        json.dumps({"case_id": "d", "module": "brain_mri", "inputs": {"volumes": ["images/ct"]}})
    )
    session = open_session(case, track="B", trace_dir=tmp_path / "trace", allow_store=(str(tmp_path),))
    volume = session.scene_data()["volume"]  # type: ignore[index]
    ras = [round(float(v), 3) for v in (volume.ijk_to_ras @ np.array([64.0, 64.0, 1.0, 1.0]))[:3]]
    assert session.call("record_key_slice", {"view": "red", "label": "key"}).ok
    assert session.call("record_point", {"ras": ras, "label": "centre"}).ok
    args = {"volume": "ct", "output_segment": "bright", "lower": 500.0, "upper": 1e6, "size": 64}
    assert session.call("segment_threshold", args).ok
    return session


@pytest.mark.parametrize("drop", [("PatientBirthDate", "PatientSex"), TYPE2], ids=["birth-date-and-sex", "all"])
def test_exports_write_missing_type2_attributes_empty(tmp_path: Path, drop: tuple[str, ...]) -> None:
    session = _session(tmp_path, drop)
    for name, args in (("export_evidence_sr", {"output_name": "sr"}),
                       ("export_dicom_seg", {"segment": "bright", "output_name": "seg"})):  # fmt: skip
        out = session.call(name, args)
        assert out.ok, (name, out.error)
        path = tmp_path / "trace" / "derived" / f"{args['output_name']}.dcm"
        assert_valid_dicom(path)
        written = pydicom.dcmread(path)
        assert all(key in written and str(written.get(key) or "") == "" for key in drop), name
    session.close()


def test_a_missing_required_attribute_is_refused_by_name(tmp_path: Path) -> None:
    session = _session(tmp_path, ("FrameOfReferenceUID", "PatientSex"))
    out = session.call("export_dicom_seg", {"segment": "bright", "output_name": "seg"})
    assert not out.ok and out.status != 500 and out.error["code"] == "missing_required_attribute"
    assert "FrameOfReferenceUID" in out.error["message"]
    assert not (tmp_path / "trace" / "derived" / "seg.dcm").exists()
    session.close()
