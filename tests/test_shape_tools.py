"""The clinician's shape tools as evidence: a bidirectional measurement (perpendicular axes checked), an angle, an
ellipse ROI with its statistics; stored in a report as SCOORD3D polylines and an ellipse with their numbers
(dciodvfy clean, read back by highdicom); a bidirectional measurement named like a lesion is its RECIST measure."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import highdicom as hd
import numpy as np
import pydicom
import pytest

from copilot.panel.sr_view import report_items
from copilot.tools.lesion_table import measurement_rows
from copilot.tools.response_measures import measured_lesions
from tests.dicom_validator import assert_valid_dicom
from tests.test_tracked_reports import _centre, _nums, _session


def _at(c: list[float], dr: float = 0.0, da: float = 0.0) -> list[float]:
    return [c[0] + dr, c[1] + da, c[2]]


def test_shapes_are_recorded_checked_and_stored(tmp_path: Path) -> None:
    session = _session(tmp_path, "shapes")
    c = _centre(session)
    vol = session.scene_data()["volume"]  # type: ignore[index]
    ok = session.call("measure_bidirectional", {"long_a": _at(c, -20), "long_b": _at(c, 20), "short_a": _at(c, 0, -6),
                                                "short_b": _at(c, 0, 6), "label": "target 1"})  # fmt: skip
    assert ok.ok and (ok.result["evidence"]["long_mm"], ok.result["evidence"]["short_mm"]) == (40.0, 12.0)
    tilted = session.call("measure_bidirectional", {"long_a": _at(c, -20), "long_b": _at(c, 20),
                                                    "short_a": _at(c, -1.1, -6),
                                                    "short_b": _at(c, 1.1, 6)})  # fmt: skip
    assert not tilted.ok and "off perpendicular" in (tilted.error or {})["message"]  # atan(2.2 / 12) = 10.4°
    longer = session.call("measure_bidirectional", {"long_a": _at(c, -2), "long_b": _at(c, 2), "short_a": _at(c, 0, -6),
                                                    "short_b": _at(c, 0, 6)})  # fmt: skip
    assert not longer.ok and len(session.evidence()) == 1
    angle = session.call("measure_angle", {"ras_a": _at(c, 10), "vertex": c, "ras_b": _at(c, 10, 10)})
    assert angle.ok and angle.result["evidence"]["angle_deg"] == pytest.approx(45.0)

    # the bright block of the sample CT: every voxel within 3 mm of its middle has the block's value
    ijk = np.array([59.5, 49.5, 1.0])
    middle = [round(float(v), 3) for v in vol.ijk_to_ras_point(ijk)]
    value = float(vol.data[1, 50, 60])
    ellipse = session.call("measure_ellipse", {"center_ras": middle, "radius_x_mm": 3.0, "radius_y_mm": 2.0,
                                               "label": "block"})  # fmt: skip
    assert ellipse.ok, ellipse.error
    rec = ellipse.result["evidence"]
    assert rec["units"] == "HU" and rec["values"] == {"mean": value, "sd": 0.0, "min": value, "max": value}
    assert rec["area_mm2"] == pytest.approx(math.pi * 6.0, abs=1e-4)
    spacing = abs(float(vol.ijk_to_ras[0, 0]))
    assert rec["voxels"] == pytest.approx(math.pi * 6.0 / spacing**2, rel=0.15)  # the pixels an ellipse covers

    # drawn on the axial view: the two axes' ends (joined in pairs), the angle's arms, the ellipse's axes
    from copilot.engine.geometry import SliceView
    from copilot.panel.screen import slice_markers

    marks = slice_markers(session.view_geometry("red", SliceView), (512, 512), 2.5, session.evidence(), None, None)
    by_item = {n: [(m.end, m.label) for m in marks if m.index == n] for n in range(3)}
    assert by_item[0] == [("a", "target 1 40.0 × 12.0 mm"), ("b", ""), ("a2", ""), ("b2", "")]
    assert by_item[1][0] == ("a", "angle 45.0°") and [e for e, _ in by_item[1]] == ["a", "b", "a2", "b2"]
    assert by_item[2][0] == ("a", f"block 18.8 mm², mean {value:g} HU")
    rows = measurement_rows(session.evidence())
    assert rows[:2] == [("target 1", "bidirectional", "40.0 × 12.0 mm"), ("angle 2", "angle", "45.0°")]
    assert rows[2][:2] == ("block", "ellipse") and f"mean {value:g} HU" in rows[2][2] and "area 18.8 mm²" in rows[2][2]
    assert list(measured_lesions(session.evidence())) == ["target 1"]
    assert measured_lesions(session.evidence())["target 1"].short_mm == 12.0
    out = session.call("export_evidence_sr", {"output_name": "shapes"})
    session.close()
    assert out.ok and out.result["measurements"] == 3, out.error
    path = tmp_path / "sessions" / "shapes" / "derived" / "shapes.dcm"
    assert_valid_dicom(path)
    report: Any = hd.sr.srread(path).content
    groups = report.get_planar_roi_measurement_groups()
    kinds = [(g.tracking_identifier, g.roi.graphic_type.value, len(g.roi.value)) for g in groups]
    assert kinds == [("target 1", "POLYLINE", 2), ("target 1", "POLYLINE", 2), ("angle 2", "POLYLINE", 3),
                     ("block", "ELLIPSE", 4)]  # fmt: skip
    assert groups[0].tracking_uid == groups[1].tracking_uid
    nums = _nums(path)
    assert nums[("Long axis", "")] == (40.0, "mm") and nums[("Short axis", "")] == (12.0, "mm")
    assert nums[("Angle", "")] == (pytest.approx(45.0), "deg")
    assert nums[("Area", "")] == (pytest.approx(math.pi * 6.0, abs=1e-3), "mm2")
    assert nums[("Attenuation Coefficient", "Mean")] == (pytest.approx(value), "[hnsf'U]")
    lps = np.array(groups[3].roi.value)
    assert np.allclose(lps.mean(axis=0), [-middle[0], -middle[1], middle[2]], atol=1e-3)
    assert pydicom.dcmread(path).Modality == "SR"
    listed = [item.text.split("  ")[0] for item in report_items(path)]  # as the desktop's stored-report panel lists
    assert listed == ["distance: target 1", "distance: target 1", "angle: angle 2", "ellipse: block"]
    assert "Mean Attenuation Coefficient" in report_items(path)[3].text
