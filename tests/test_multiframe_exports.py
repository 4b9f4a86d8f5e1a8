"""SEG and measurement-report exports over an enhanced (multi-frame) CT, opened as a file and from a folder: both
reference the source instance with the frame number of each slice, and dciodvfy reports no error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pydicom
import pytest

from copilot.runtime import open_session
from tests.dicom_validator import assert_valid_dicom, export_bright_seg
from tests.test_multiframe import enhanced_ct

ZS = [0.0, 2.5, 5.0, 7.5]


def _walk(items: Any) -> list[Any]:
    out = []
    for item in items or []:
        out.append(item)
        out += _walk(item.get("ContentSequence"))
    return out


@pytest.fixture(params=["file", "folder"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    case = tmp_path / "case"
    (case / "images" / "ct").mkdir(parents=True)
    file = enhanced_ct(case / "images" / "ct", ZS)
    source = f"images/ct/{file.name}" if request.param == "file" else "images/ct"
    pack = {"case_id": "mf", "module": "brain_mri", "inputs": {"volumes": [source]}}
    (case / "case.json").write_text(json.dumps(pack))
    s = open_session(case, track="B", trace_dir=tmp_path / "trace", allow_store=(str(tmp_path),))
    yield s
    s.close()


def _frame_at(file: Path, z: float) -> int:
    ds = pydicom.dcmread(file)
    zs = [float(f.PlanePositionSequence[0].ImagePositionPatient[2]) for f in ds.PerFrameFunctionalGroupsSequence]
    return zs.index(z) + 1


def test_seg_references_each_frame_of_the_enhanced_source(session: Any, tmp_path: Path) -> None:
    vol = session.scene_data()["volume"]
    seg = export_bright_seg(session, vol, tmp_path / "trace", 95, 64)
    source = next((tmp_path / "case" / "images" / "ct").glob("*.dcm"))
    uid = str(pydicom.dcmread(source, stop_before_pixels=True).SOPInstanceUID)
    refs = [(str(s.ReferencedSOPInstanceUID), [int(n) for n in np.atleast_1d(s.ReferencedFrameNumber)])
            for f in seg.PerFrameFunctionalGroupsSequence for d in f.DerivationImageSequence
            for s in d.SourceImageSequence]  # fmt: skip
    assert {r[0] for r in refs} == {uid} and sorted(n for _, ns in refs for n in ns) == [1, 2, 3, 4]
    for k in range(4):  # each SEG frame is the mask of the slice at its referenced frame's position
        z = float((vol.ijk_to_ras @ np.array([0.0, 0.0, k, 1.0]))[2])
        frame = _frame_at(source, z)
        mask = seg.get_pixels_by_source_frame(uid, [frame], segment_numbers=[1])
        assert np.array_equal(mask[0, :, :, 0] > 0, session._viewer.segment("bright")[1].mask.data[k] > 0)


def test_report_references_the_key_slice_frame(session: Any, tmp_path: Path) -> None:
    vol = session.scene_data()["volume"]
    centre = vol.ijk_to_ras @ np.array([64.0, 64.0, 2.0, 1.0])
    ras = [float(v) for v in centre[:3]]
    assert session.call("set_slice_offset", {"view": "red", "offset": ras[2]}).ok
    assert session.call("record_key_slice", {"view": "red", "label": "nodule"}).ok
    assert session.call("record_point", {"ras": ras}).ok
    assert session.call("measure_distance", {"ras_a": ras, "ras_b": [ras[0] + 10.0, ras[1], ras[2]]}).ok
    out = session.call("export_evidence_sr", {"output_name": "report"})
    assert out.ok and out.result["key_slices"] == 1 and out.result["left_out"] == 0, out.error
    path = tmp_path / "trace" / "derived" / "report.dcm"
    assert_valid_dicom(path)
    sr = pydicom.dcmread(path)
    images = [i for i in _walk(sr.ContentSequence) if i.ValueType == "IMAGE"]
    source = next((tmp_path / "case" / "images" / "ct").glob("*.dcm"))
    frames = {int(n) for i in images for r in i.ReferencedSOPSequence for n in np.atleast_1d(r.ReferencedFrameNumber)}
    assert frames == {_frame_at(source, round(ras[2], 3))}
    assert len(sr.CurrentRequestedProcedureEvidenceSequence[0].ReferencedSeriesSequence[0].ReferencedSOPSequence) == 1
