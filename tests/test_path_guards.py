"""Pathology workflow guards on a small generated slide: 1024 × 768 px at 2 µm/px (5× at downsample 1, by
10 µm / mpp) in a 1024 × 768 viewer, so the fitted view shows the whole slide at downsample 1 and a 0–999
point (500, 500) is the view's centre. Each case is worked out by hand in its docstring."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from copilot.bench.tables.analysis import guard_table
from copilot.engine.slide.viewer import EmbeddedSlideViewer
from copilot.medflow import make_cases
from copilot.medflow.bench_run import run_batch
from copilot.medflow.runs import read_results
from copilot.replay import replay
from copilot.runtime import open_session
from copilot.tools.slide_guards import MIN_EVIDENCE_MAGNIFICATION


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (path,) = make_cases("breast_wsi", 1, 5, tmp_path_factory.mktemp("slide"), slide_size=(1024, 768), mpp=2.0)
    return Path(path)


def codes(result: dict[str, Any]) -> list[str]:
    return [w["code"] for w in result.get("warnings", [])]


def test_clean_episode_fires_no_guard_and_replays(case: Path, tmp_path: Path) -> None:
    """Zoom in ×2 on screenshot (250, 250): centre (256, 192), downsample 0.5 (10×), visible [0, 0, 512, 384].
    The recorded centre (256, 192) and the converted corner (511.5, 383.6) were both on that screenshot."""
    session = open_session(case, trace_dir=tmp_path / "trace")
    zoomed = session.call("zoom", {"direction": "in", "amount": 2, "x": 250, "y": 250})
    assert zoomed.ok and zoomed.result["magnification"] == 10.0
    assert session.snapshot()["visible_region"] == [0.0, 0.0, 512.0, 384.0]
    rec = session.call("record_view_evidence", {"label": "focus", "x": 500, "y": 500})
    assert rec.ok and rec.result["evidence"]["point"]["x"] == 256.0 and codes(rec.result) == []
    conv = session.call("viewer_point_to_wsi_coordinate", {"x": 999, "y": 999})
    assert conv.ok and (conv.result["x"], conv.result["y"]) == (511.49, 383.62) and codes(conv.result) == []
    cap = session.call("capture_viewer", {"label": "c"})
    assert cap.ok and codes(cap.result) == []
    session.close()
    assert replay(tmp_path / "trace").ok


def test_low_magnification_evidence(case: Path, tmp_path: Path) -> None:
    """Zoom out ×2: downsample 2, 2.5× < 5× → the recording warns (the view was shown: nothing else); zoom
    to 5× (downsample 1, not below the threshold) → no warning. The warnings replay identically."""
    assert MIN_EVIDENCE_MAGNIFICATION == 5.0
    session = open_session(case, trace_dir=tmp_path / "trace")
    out = session.call("zoom", {"direction": "out", "amount": 2})
    assert out.ok and out.result["magnification"] == 2.5
    before = session.snapshot()
    low = session.call("record_view_evidence", {"label": "overview"})
    assert low.ok and codes(low.result) == ["low_magnification_evidence"]
    assert "2.50×" in low.result["warnings"][0]["message"]
    assert {k: v for k, v in session.snapshot().items() if k != "evidence"} == {
        k: v for k, v in before.items() if k != "evidence"
    }  # a guard changes no viewer state
    assert session.call("zoom", {"direction": "in", "amount": 5, "unit": "magnification"}).ok
    ok = session.call("record_view_evidence", {"label": "5x", "x": 500, "y": 500})
    assert ok.ok and codes(ok.result) == []
    session.close()
    assert replay(tmp_path / "trace").ok


def test_threshold_from_case_inputs(case: Path, tmp_path: Path) -> None:
    """A case may ask for more: min_evidence_magnification 10 makes 5× (downsample 1) too low."""
    strict = tmp_path / "strict"
    shutil.copytree(case, strict)
    data = json.loads((strict / "case.json").read_text())
    data["inputs"]["min_evidence_magnification"] = 10
    (strict / "case.json").write_text(json.dumps(data))
    session = open_session(strict)
    rec = session.call("record_view_evidence", {"label": "5x"})
    assert codes(rec.result) == ["low_magnification_evidence"]


def test_stale_view_and_unobserved_point(case: Path) -> None:
    """The loaded view (downsample 1, the whole slide) was shown. The host's window then zooms to downsample
    0.25 on (700, 500) — visible [572, 404, 828, 596] — without a screenshot: the view is stale, and (700, 500)
    was only seen at downsample 1 > 2 × 0.25, so it is unobserved at this resolution, for both the recording and
    the conversion. A screenshot (focus_qupath) clears both. The host then pans to (650, 500): stale again, but
    (650, 500) lies in the shown [572, 404, 828, 596] at the same downsample, so not unobserved."""
    viewer = EmbeddedSlideViewer()
    session = open_session(case, viewer=viewer)
    viewer.set_downsample(0.25)
    viewer.set_centre(700.0, 500.0)
    rec = session.call("record_view_evidence", {"label": "hp", "x": 500, "y": 500})
    assert rec.ok and rec.result["evidence"]["point"]["x"] == 700.0
    assert codes(rec.result) == ["unobserved_evidence", "stale_view"]
    conv = session.call("viewer_point_to_wsi_coordinate", {"x": 500, "y": 500})
    assert conv.ok and codes(conv.result) == ["unobserved_evidence", "stale_view"]
    assert session.call("focus_qupath", {}).ok
    assert session.snapshot()["visible_region"] == [572.0, 404.0, 828.0, 596.0]
    fresh = session.call("record_view_evidence", {"label": "hp", "x": 500, "y": 500})
    assert codes(fresh.result) == []
    viewer.set_centre(650.0, 500.0)
    moved = session.call("record_view_evidence", {"label": "hp2", "x": 500, "y": 500})
    assert codes(moved.result) == ["stale_view"]
    assert len(session.evidence()) == 3  # every warned call still recorded its evidence


def test_report_counts_pathology_guards(case: Path, tmp_path: Path) -> None:
    """Faulty script: zoom out ×2 and record at 2.5× (one low_magnification_evidence); good script: zoom in ×2
    and record (none). The guard table has the pathology column: faulty 1, good 0."""
    answer = "Rationale."
    faulty = [
        {"handler": "zoom", "args": {"direction": "out", "amount": 2}},
        {"handler": "record_view_evidence", "args": {"label": "overview"}},
    ]
    good = [
        {"handler": "zoom", "args": {"direction": "in", "amount": 2}},
        {"handler": "record_view_evidence", "args": {"label": "focus", "x": 500, "y": 500}},
    ]
    scripts = {}
    for name, calls in (("faulty", faulty), ("good", good)):
        (tmp_path / f"{name}.json").write_text(json.dumps({"calls": calls, "answer": answer}))
        scripts[name] = f"scripted:{tmp_path / f'{name}.json'}"
    run = tmp_path / "run"
    (bad,) = run_batch(case, scripts["faulty"], run, progress=None, model="faulty")
    (good_row,) = run_batch(case, scripts["good"], run, progress=None, model="good")
    assert bad["process"]["workflow_guards"] == {"low_magnification_evidence": 1}
    assert good_row["process"]["workflow_guards"] == {}
    table = guard_table(read_results(run / "results.sqlite"))
    header = [text for text, _ in table.header[0]]
    col = header.index("low_magnification_evidence")
    rows = {r[0].text().split(" · ")[0]: [c.text() for c in r] for r in table.rows}  # model · provider · …
    assert rows["faulty"][col] == "1" and rows["good"][col] == "0"
    assert rows["faulty"][-1] == "1" and rows["good"][-1] == "0"
    trace = (run / bad["trace_dir"] / "trace.jsonl").read_text()
    assert '"code":"low_magnification_evidence"' in trace
