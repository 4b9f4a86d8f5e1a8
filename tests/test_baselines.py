"""Offline baselines: `medcopilot run --policy baseline` on every module, and a brain batch whose baseline
really finds the lesion (non-trivial Loc)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copilot.bench.report.run_report import summary
from copilot.cli import main
from copilot.medflow import make_case
from copilot.medflow.bench_run import run_batch

SMALL = {
    "brain_mri": {"spacing": 3.0},
    "longitudinal_mri": {"spacing": 3.0},
    "lung_petct": {"spacing": 5.0},
    "breast_wsi": {"slide_size": (1024, 768), "mpp": 2.0},
    "lymph_node_wsi": {"slide_size": (1024, 768), "mpp": 4.0},
}


@pytest.mark.parametrize("module", list(SMALL))
def test_run_baseline_on_every_module(module: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    case = make_case(module, tmp_path / "cases", f"{module}_x", seed=4, **SMALL[module])
    assert main(["run", "--case", str(case), "--policy", "baseline", "--out", str(tmp_path / "trace")]) == 0
    out = capsys.readouterr().out
    assert "status=done" in out
    events = [json.loads(line) for line in (tmp_path / "trace" / "trace.jsonl").read_text().splitlines()]
    score = next(e for e in events if e["type"] == "score")
    assert score["parse_error"] is None  # the baseline answers in the module's format
    assert any(e.get("actor") == "agent" for e in events)  # it worked through the handlers


def test_brain_baseline_finds_the_lesion(tmp_path: Path) -> None:
    for i, label in enumerate("ABDEF"):
        from copilot.cases.brain import make_brain_case

        make_brain_case(tmp_path / "cases", f"b{label}", 50 + i, spacing=3.0, label=label)
    rows = run_batch(tmp_path / "cases", "baseline", tmp_path / "run", workers=2, progress=None)
    stats = summary(rows)[("A", "baseline", "brain_mri")]
    assert stats["loc"] >= 0.6, stats
    assert (tmp_path / "run" / "report.html").read_text().count("baseline") >= 1
