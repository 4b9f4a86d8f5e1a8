"""A RECIST 1.1 response stored as a measurement report per time point: the baseline session measures two target
lesions (long and short axes labelled with their names), the follow-up session of another study of the patient
measures them again; its report holds both lesions' polylines and lengths with the time point context, under the
baseline's Tracking UIDs, and the response computed against the baseline report: 70 → 45.5 mm, −35 % → PR."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import highdicom as hd
import pydicom

from copilot.panel.report import measurements_html
from copilot.tools.lesion_table import lesion_history
from tests.dicom_validator import assert_valid_dicom
from tests.test_tracked_reports import _centre, _session


def _measure(session: Any, name: str, long_mm: float, short_mm: float | None, dz: float = 0.0) -> None:
    c = _centre(session)
    axes = [([c[0] - long_mm / 2, c[1], c[2] + dz], [c[0] + long_mm / 2, c[1], c[2] + dz])]
    if short_mm is not None:
        axes.append(([c[0], c[1] - short_mm / 2, c[2] + dz], [c[0], c[1] + short_mm / 2, c[2] + dz]))
    for a, b in axes:
        assert session.call("measure_distance", {"ras_a": a, "ras_b": b, "label": name}).ok


def _groups(path: Path) -> dict[str, Any]:
    """Tracking Identifier → its first group (the long axis, holding both lengths)."""
    report: Any = hd.sr.srread(path).content
    found: dict[str, Any] = {}
    for g in report.get_planar_roi_measurement_groups():
        found.setdefault(g.tracking_identifier, g)
    return found


def _finding(path: Path) -> str:
    pending = list(pydicom.dcmread(path).ContentSequence)
    while pending:
        item = pending.pop()
        if item.ValueType == "TEXT" and item.ConceptNameCodeSequence[0].CodeMeaning == "Finding":
            return str(item.TextValue)
        pending.extend(getattr(item, "ContentSequence", []))
    return ""


def test_follow_up_report_computes_recist_from_the_baseline_report(tmp_path: Path) -> None:
    first = _session(tmp_path, "baseline")
    _measure(first, "target 1", 40.0, 25.0)
    _measure(first, "target 2", 30.0, None, dz=2.5)
    out = first.call("export_response_sr", {"criteria": "recist", "output_name": "recist_baseline",
                                            "time_point": "baseline"})  # fmt: skip
    first.close()
    assert out.ok, out.error
    assert out.result["category"] == "baseline" and out.result["earlier"] == []
    base_path = tmp_path / "sessions" / "baseline" / "derived" / "recist_baseline.dcm"
    assert_valid_dicom(base_path)

    second = _session(tmp_path, "week8")
    _measure(second, "target 1", 26.0, 15.0)
    _measure(second, "Target 2", 19.5, None, dz=2.5)
    plan = second.plan_write("export_response_sr", {"criteria": "recist", "output_name": "recist_week8",
                                                    "time_point": "week 8"})  # fmt: skip
    assert plan is not None and "response at week 8: PR" in plan.what
    out = second.call("export_response_sr", {"criteria": "recist", "output_name": "recist_week8",
                                             "time_point": "week 8"})  # fmt: skip
    evidence = second.evidence()
    second.close()
    assert out.ok, out.error
    assert out.result["category"] == "PR" and out.result["sums"] == {"baseline": 70.0, "week 8": 45.5}
    assert "-35.0 % from the baseline 70.0 mm: ≥ 30 % decrease" in out.result["rule"]
    path = tmp_path / "sessions" / "week8" / "derived" / "recist_week8.dcm"
    assert_valid_dicom(path)
    base, follow = _groups(base_path), _groups(path)
    assert set(follow) == {"target 1", "target 2"}
    assert all(follow[k].tracking_uid == base[k].tracking_uid for k in follow)
    one = follow["target 1"]
    lengths = {m.name.meaning: m.value for m in one.get_measurements()}
    assert lengths == {"Long axis": 26.0, "Short axis": 15.0}
    assert one.roi.graphic_type == hd.sr.GraphicTypeValues3D.POLYLINE and len(one.roi.value) == 2
    finding = _finding(path)
    assert finding.startswith("RECIST 1.1 response at week 8: PR.") and "nadir 70 (baseline)" in finding
    assert "≥ 30 % decrease" in finding
    time_points = [c for c in pydicom.dcmread(path).ContentSequence[-2].ContentSequence[0].ContentSequence
                   if c.ConceptNameCodeSequence[0].CodeMeaning == "Time Point"]  # fmt: skip
    assert [t.TextValue for t in time_points] == ["week 8"]

    # the lesion history the session report shows: the baseline report's axes, then this session's
    history = lesion_history(path.parent, tmp_path / "patient" / "week8", evidence)
    assert history.time_points == ["baseline", "this session"]
    assert history.lesions == [("target 1", ["40.0 × 25.0 mm", "26.0 × 15.0 mm"]),
                               ("target 2", ["30.0 mm", "19.5 mm"])]  # fmt: skip
    page = measurements_html(evidence, path.parent, tmp_path / "patient" / "week8")
    assert "<h3>Tracked lesions</h3>" in page and "<td>26.0 × 15.0 mm</td>" in page
