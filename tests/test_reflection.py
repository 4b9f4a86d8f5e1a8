"""Reflection-round improvement (ACP-Bench's final-versus-first delta) on hand-made traces, with the arithmetic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from copilot.bench.measures.reflection import (
    call_rounds,
    episode_reflection,
    reflection_html,
    reflection_summary,
    round_delta,
    scored_recordings,
)
from copilot.bench.scoring.scorers import Truth
from copilot.cases.pack import load_case


def turn(rnd: int) -> dict[str, Any]:
    return {"type": "model_turn", "round": rnd, "tool_calls": [{"name": "x"}]}


def call(seq: int, evidence: dict[str, Any] | None = None, ok: bool = True) -> dict[str, Any]:
    return {"type": "handler_call", "actor": "agent", "seq": seq, "handler": "record_point", "ok": ok,
            "result": {"evidence": evidence} if evidence else {}}  # fmt: skip


def test_calls_take_their_model_round_or_their_order() -> None:
    """Two model rounds: the calls of round 1 (seqs 1, 2) and of round 2 (seq 3). Without model turns (an
    offline policy) each call is its own round: 1, 2, 3."""
    events = [turn(1), call(1), call(2), turn(2), call(3)]
    assert [r for r, _ in call_rounds(events)] == [1, 1, 2]
    assert [r for r, _ in call_rounds([call(1), call(2), call(3)])] == [1, 2, 3]


def test_final_versus_first_delta() -> None:
    """Points: round 1 records 2 (1 inside) → m_first = 1/2; round 3 records 1 inside → m_last = 1; Δ = +0.5,
    improved. Key slices come second: with points in two rounds they are not looked at."""
    recs = [(1, "point", True), (1, "point", False), (2, "key_slice", False), (3, "point", True),
            (3, "key_slice", True)]  # fmt: skip
    out = round_delta(recs)
    assert (out["family"], out["comparable_rounds"], out["output_rounds"]) == ("point", 2, 3)
    assert (out["first"], out["last"], out["delta"], out["outcome"]) == (0.5, 1.0, 0.5, "improved")


def test_worse_unchanged_and_not_comparable() -> None:
    """Key slices 1 → 0: Δ = −1, worse. Points 1 → 1: Δ 0, unchanged (|Δ| ≤ 0.001). One scored round, or only
    unscorable recordings (a negative case): no delta, outcome None (N/A), the output rounds still counted."""
    assert round_delta([(1, "key_slice", True), (4, "key_slice", False)])["outcome"] == "worse"
    assert round_delta([(1, "point", True), (2, "point", True)])["delta"] == 0.0
    assert round_delta([(1, "point", True), (2, "point", True)])["outcome"] == "unchanged"
    lone = round_delta([(1, "point", True), (1, "point", False)])
    assert (lone["outcome"], lone["delta"], lone["output_rounds"]) == (None, None, 1)
    negative = round_delta([(1, "point", None), (2, "point", None)])
    assert (negative["outcome"], negative["output_rounds"]) == (None, 2)


def test_recordings_scored_against_the_hidden_lesion(brain_case: Path) -> None:
    """The synthetic brain case's lesion: a recording at the mask's first voxel centre is inside, one 60 mm to
    its right outside. Round 1 records outside, round 2 inside → 0 → 1, Δ = +1, improved; a key slice at the
    lesion's S extent is inside (scored, but points come first)."""
    case = load_case(brain_case)
    truth = Truth(case)
    m = truth.mask.ijk_to_ras  # type: ignore[union-attr]
    inside = (np.r_[truth.mask_voxels[0], 1.0] @ m.T)[:3]
    lo, _ = truth.slice_extent("S")  # type: ignore[misc]
    events = [
        turn(1), call(1, {"kind": "point", "ras": [float(inside[0]) + 60.0, *map(float, inside[1:])]}),
        turn(2), call(2, {"kind": "point", "ras": [float(v) for v in inside]}),
        call(3, {"kind": "key_slice", "axis": "S", "offset_mm": lo}),
        call(4, {"kind": "point", "ras": [0.0, 0.0, 0.0]}, ok=False),  # a refused call records nothing
    ]  # fmt: skip
    assert scored_recordings(events, case, truth) == [(1, "point", False), (2, "point", True), (2, "key_slice", True)]
    out = episode_reflection(events, case, truth, reflect_turns=1)
    assert (out["rounds"], out["reflect_turns"], out["delta"], out["outcome"]) == (2, 1, 1.0, "improved")


def test_summary_per_configuration_and_na() -> None:
    """One configuration, three episodes: improved (Δ +1), worse (Δ −0.5), not comparable. Mean Δ over the two
    comparable ones = (1 − 0.5) / 2 = 0.25. Rows without the record (an older run): no entry, the report says
    N/A."""

    def row(case: str, rec: dict[str, Any] | None) -> dict[str, Any]:
        return {"model": "m", "policy": "baseline", "track": "A", "budget": 20, "case_id": case,
                "module": "brain_mri", "process": {"reflection": rec} if rec else {}}  # fmt: skip

    def rec(delta: float | None, outcome: str | None, reflect: int = 0) -> dict[str, Any]:
        return {"rounds": 3, "reflect_turns": reflect, "output_rounds": 2 if delta is not None else 1,
                "delta": delta, "outcome": outcome}  # fmt: skip

    rows = [row("a", rec(1.0, "improved", 1)), row("b", rec(-0.5, "worse")), row("c", rec(None, None))]
    (s,) = reflection_summary(rows).values()
    assert (s["episodes"], s["with_output"], s["with_reflection"], s["comparable"]) == (3, 3, 1, 2)
    assert (s["improved"], s["unchanged"], s["worse"], s["not_comparable"]) == (1, 0, 1, 1)
    assert s["mean_delta"] == pytest.approx(0.25)
    assert "+0.25" in reflection_html(reflection_summary(rows))
    assert reflection_summary([row("d", None)]) == {}
    assert "N/A" in reflection_html({})


def test_a_scripted_episode_that_revises_its_point(brain_case: Path, tmp_path: Path) -> None:
    """A scripted episode (offline: each call its own round) records a point 40 mm off the lesion at call 1 and
    one in the lesion at call 2: rounds 1 and 2 score 0 and 1, Δ = +1, improved; the run's summary counts it."""
    import json

    from copilot.medflow.bench_run import run_batch

    truth = Truth(load_case(brain_case))
    m = truth.mask.ijk_to_ras  # type: ignore[union-attr]
    inside = [round(float(v), 3) for v in (np.r_[truth.mask_voxels[len(truth.mask_voxels) // 2], 1.0] @ m.T)[:3]]
    off = [inside[0] + 40.0 if inside[0] < 0 else inside[0] - 40.0, *inside[1:]]
    script = tmp_path / "revise.json"
    script.write_text(json.dumps({"calls": [{"handler": "record_point", "args": {"ras": off}},
                                            {"handler": "record_point", "args": {"ras": inside}}],
                                  "answer": "ANSWER: A"}))  # fmt: skip
    (row,) = run_batch(brain_case, f"scripted:{script}", tmp_path / "run", progress=None, model="revise")
    rec = row["process"]["reflection"]
    assert truth.ras_hit((inside[0], inside[1], inside[2])) and not truth.ras_hit((off[0], off[1], off[2]))
    assert (rec["rounds"], rec["output_rounds"], rec["family"]) == (2, 2, "point")
    assert (rec["first"], rec["last"], rec["delta"], rec["outcome"]) == (0.0, 1.0, 1.0, "improved")
    (summary,) = reflection_summary([row]).values()
    assert (summary["improved"], summary["comparable"], summary["mean_delta"]) == (1, 1, 1.0)
