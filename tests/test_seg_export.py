"""`export_dicom_seg` on sources with, without and with empty SliceThickness: a SEG that dciodvfy accepts, whose
Pixel Measures state the slice thickness (from the slice positions when the source lacks it), never a 500."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pydicom
import pytest

from copilot.replay import replay
from tests.dicom_validator import export_bright_seg


def _case(tmp_path: Path, thickness: str | None) -> Path:
    from tests.test_adapters import _dicom_series, _nifti

    case = tmp_path / "case"
    _nifti(case / "images" / "T1.nii.gz", np.zeros((4, 5, 6), np.float32))
    (case / "case.json").write_text(
        json.dumps({"case_id": "d", "module": "brain_mri", "inputs": {"volumes": ["images/T1.nii.gz"]}})
    )
    folder = case / "images" / "ct_series"
    _dicom_series(folder, 4, "CT", 10.0, 3.0)
    for path in folder.iterdir():
        ds = pydicom.dcmread(path)
        if thickness is None:
            del ds.SliceThickness
        else:
            ds.SliceThickness = thickness
        ds.save_as(path)
    return case


@pytest.mark.parametrize(("thickness", "expected"), [("3.0", 3.0), (None, 3.0), ("", 3.0), ("1.5", 1.5)])
def test_seg_validates_with_any_slice_thickness(tmp_path: Path, thickness: str | None, expected: float) -> None:

    from copilot.runtime import open_session

    session = open_session(_case(tmp_path, thickness), track="B", trace_dir=tmp_path / "trace",
                           allow_store=(str(tmp_path),))  # fmt: skip
    assert session.call("import_dicom", {"path": "images/ct_series"}).ok
    vol = session._viewer.volume(session._viewer.resolve_volume(volume_name="ct_series"))
    seg = export_bright_seg(session, vol, tmp_path / "trace", 90, 96)
    measures = seg.SharedFunctionalGroupsSequence[0].PixelMeasuresSequence[0]
    assert float(measures.SliceThickness) == pytest.approx(expected)
    assert seg.get_pixels_by_source_instance(
        [s.ReferencedSOPInstanceUID for s in seg.ReferencedSeriesSequence[0].ReferencedInstanceSequence][:1],
        segment_numbers=[1],
    ).shape[0] == 1
    session.close()
    written = sorted((tmp_path / "trace" / "derived").iterdir())
    report = replay(tmp_path / "trace")  # the export is checked, not written again (no second SEG, no new UIDs)
    assert report.ok and report.exports == 1, report.summary()
    assert sorted((tmp_path / "trace" / "derived").iterdir()) == written
