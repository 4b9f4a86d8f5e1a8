"""`bench perturb`: seed 001's seven single-fault types injected into traces (declared, replayable, recorded in
the header), and the sensitivity / selectivity / localisation statistics (hand-computed fixtures)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from copilot.bench.measures import dimensions as D
from copilot.bench.measures.perturb import FAULTS, fault_statistics, fault_target, perturb, rechain, write_trace
from copilot.cases.lung import make_lung_case
from copilot.cases.pack import load_case
from copilot.medflow.bench_run import run_batch
from copilot.replay import read_events


def call(handler: str, ok: bool = True, **extra: Any) -> dict[str, Any]:
    return {"type": "handler_call", "actor": "agent", "handler": handler, "ok": ok, "args": {}, "result": {"r": 1},
            "state": {"active_volume_name": "CT"}, "images": [], **extra}  # fmt: skip


def test_seven_faults_one_per_dimension() -> None:
    assert sorted(f.target for f in FAULTS.values()) == sorted(D.DIMENSIONS)
    assert all(fault_target(name) == f.target for name, f in FAULTS.items())
    assert (fault_target("stale_view"), fault_target("no_such_fault")) == ("V", None)  # labelled by hand; unknown


@pytest.fixture(scope="module")
def lung(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_lung_case(tmp_path_factory.mktemp("perturb"), "lung", 20, spacing=6.0)


def test_each_fault_edits_the_trace_as_declared(lung: Path) -> None:
    """A clean trace: start, observe, record_point on CT (the source series), end (done). Each fault's edit:
    F the end's status; R observe repeated after itself; E the recording reported on another series; W the
    recording moved before the look; A the last result dropped; V a select_volume appended before the end;
    B a refused out-of-case call appended. Applying a fault twice gives the same trace (replayable); the
    header records the fault; the chain is valid."""
    case = load_case(lung)
    source = case.prompt["source_series"]
    clean = rechain([
        {"type": "episode_start", "case_id": "lung"},
        call("observe", images=[{"view": "red"}]),
        call("record_point", result={"evidence": {"kind": "point", "ras": [0, 0, 0], "volume": source}}),
        {"type": "episode_end", "status": "done", "response": "x"},
    ])  # fmt: skip
    out = {name: perturb(clean, name, case, "episodes/x") for name in FAULTS}
    assert all(v is not None for v in out.values())
    handlers = {n: [e.get("handler") for e in ev if e["type"] == "handler_call"] for n, ev in out.items() if ev}
    assert out["unfinished_episode"][-1]["status"] == "budget_exhausted"  # type: ignore[index]
    assert handlers["redundant_call"] == ["observe", "observe", "record_point"]
    assert out["wrong_series"][2]["result"]["evidence"]["volume"] != source  # type: ignore[index]
    assert handlers["order_swapped"] == ["record_point", "observe"]
    assert out["unlogged_output"][2]["result"] is None  # type: ignore[index]
    assert handlers["unverified_change"][-1] == "select_volume"
    oob = out["out_of_bounds_call"][-2]  # type: ignore[index]
    assert oob["ok"] is False and oob["error"]["code"] == "path_outside_case"
    header = out["wrong_series"][0]  # type: ignore[index]
    assert header["perturbation"] == {"fault": "wrong_series", "target": "E", "clean_trace": "episodes/x",
                                      "does": FAULTS["wrong_series"].does}  # fmt: skip
    assert perturb(clean, "wrong_series", case, "episodes/x") == out["wrong_series"]
    assert [e["seq"] for e in out["redundant_call"]] == list(range(5))  # type: ignore[union-attr]


def test_a_fault_that_does_not_apply() -> None:
    """No source series on the case: wrong_series does not apply (None), so the pair is not formed."""

    case = SimpleNamespace(prompt={}, inputs={}, kind="radiology")
    assert perturb([{"type": "episode_start"}], "wrong_series", case, "") is None  # type: ignore[arg-type]


def test_fault_statistics_by_hand() -> None:
    """unverified_change (target V) on two pairs: clean V 1, R 1, F 1 → perturbed V 0.5 (drops V 0.5, margin 0.5)
    and V 0.6, R 0.9 (drops V 0.4, R 0.1, margin 0.3). Detection 2/2; target drop 0.45 with CI from the
    resampled means {0.4, 0.45, 0.5} → [0.4, 0.5]; margin 0.4, CI [0.3, 0.5]. redundant_call (target R) on one
    pair: R 1 → 0.9. Localisation: truth [V, V, R], predicted [V, V, R] → balanced accuracy 1, macro-F1 1; a
    permutation of the predictions matches only when R lands on the third pair (1 in 3): p ≈ 1/3."""

    def r(case: str, dims: dict[str, float], fault: str | None = None) -> dict[str, Any]:
        return {"model": "m", "policy": "baseline", "case_id": case, "perturbation": fault,
                "process": {"dimensions": {d: {"score": v} for d, v in dims.items()}}}  # fmt: skip

    clean = [r(c, {"F": 1, "R": 1, "V": 1}) for c in ("a", "b", "c")]
    perturbed = [r("a", {"F": 1, "R": 1, "V": 0.5}, "unverified_change"),
                 r("b", {"F": 1, "R": 0.9, "V": 0.6}, "unverified_change"),
                 r("c", {"F": 1, "R": 0.9, "V": 1}, "redundant_call")]  # fmt: skip
    out = fault_statistics(clean, perturbed)
    v = out["faults"]["unverified_change"]
    assert (v["pairs"], v["detection_rate"]) == (2, 1.0)
    assert v["target_drop"] == pytest.approx(0.45) and v["target_drop_ci"] == pytest.approx((0.4, 0.5))
    assert v["selectivity_margin"] == pytest.approx(0.4) and v["selectivity_margin_ci"] == pytest.approx((0.3, 0.5))
    assert out["faults"]["redundant_call"]["target_drop"] == pytest.approx(0.1)
    loc = out["localisation"]
    assert (loc["pairs"], loc["balanced_accuracy"], loc["macro_f1"]) == (3, 1.0, 1.0)
    assert 0.25 < loc["permutation_p"] < 0.42


def test_bench_perturb_on_a_run(lung: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The baseline on one lung case, then `bench perturb`: every fault applies, each moves its target dimension
    (detection 1.00), the perturbed traces are valid chains beside the run whose header names the fault, and
    the JSON report and report.html carry the statistics."""
    from copilot.cli import main

    run = tmp_path / "run"
    run_batch(lung.parent, "baseline", run, progress=None)
    assert main(["bench", "perturb", str(run), "--cases", str(lung.parent)]) == 0
    note = capsys.readouterr().out
    for name in FAULTS:
        line = next(x for x in note.splitlines() if x.startswith(name))
        assert line.split()[2] == "1" and line.split()[3] == "1.00", line
    rows = [json.loads(x) for x in (run / "perturbations.jsonl").read_text().splitlines()]
    assert sorted(r["perturbation"] for r in rows) == sorted(FAULTS)
    events, report = read_events(run / rows[0]["trace_dir"])
    assert report is None and events[0]["perturbation"]["fault"] == rows[0]["perturbation"]
    assert main(["bench", "report", str(run), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["perturbations"]["localisation"]["pairs"] == 7
    assert main(["bench", "report", str(run)]) == 0
    assert 'id="perturbations"' in (run / "report.html").read_text()
    assert main(["bench", "perturb", str(run), "--cases", str(lung.parent), "--fault", "nope"]) == 2


def test_write_trace_round_trip(tmp_path: Path) -> None:
    events = rechain([{"type": "episode_start"}, {"type": "episode_end", "status": "done"}])
    write_trace(tmp_path / "t" / "trace.jsonl", events)
    got, report = read_events(tmp_path / "t")
    assert report is None and got == events
