"""Paired bootstrap for every change, and n with a CI on Model Avg. and mean cells (hand-computed fixtures)."""

from __future__ import annotations

from typing import Any

import pytest

import copilot.medflow  # noqa: F401  (registers the benchmark modules the tables look up)
from copilot.bench.measures import dimensions as D
from copilot.bench.scoring.stats import delta_ci
from copilot.bench.tables.aggregate import mean_cell, score_cell, stat_of
from copilot.bench.tables.paper import table1


def test_identical_runs_change_by_zero_with_a_zero_interval() -> None:
    """Cases x, y with Strict 1 and 0 in both runs: every per-case difference is 0, so every joint resample's
    mean is 0 → Δ [0.00, 0.00] (resampling the two runs independently gave [−1, +1]: means of {1, 0} draws)."""
    assert delta_ci({"x": 1.0, "y": 0.0}, {"x": 1.0, "y": 0.0}) == (0.0, 0.0)


def test_paired_interval_by_hand() -> None:
    """Per-case differences x 1 − 0 = 1, y 1 − 0.5 = 0.5; a resample of two draws has mean 0.5 (p 1/4), 0.75
    (1/2) or 1 (1/4), so the 2.5th and 97.5th percentiles are 0.5 and 1.0. A case only one run holds (z) is
    left out; with one common case there is no interval."""
    assert delta_ci({"x": 1.0, "y": 1.0, "z": 0.0}, {"x": 0.0, "y": 0.5}) == (0.5, 1.0)
    assert delta_ci({"x": 1.0}, {"x": 0.0, "y": 1.0}) is None


def test_table_change_of_identical_runs() -> None:
    """A module cell against itself as the reference: Δ 0.00 and Δ [+0.00, +0.00] in its detail."""
    rows = [{"case_id": c, "strict": s, "status": "done"} for c, s in (("x", 1.0), ("y", 0.0))]
    st = {"strict": stat_of(rows, lambda r: r["strict"])}
    c = score_cell(st, "strict", "strict", st)
    assert c.delta == 0.0 and c.delta_ci == (0.0, 0.0) and "Δ [+0.00, +0.00]" in c.detail()


def test_mean_cell_has_n_and_a_ci() -> None:
    """Column A over cases a1, a2 both 1 (every resample 1); column B over b1 0, b2 1 (resampled means 0, 0.5, 1
    with p 1/4, 1/2, 1/4). Their mean 0.75 resamples to (1 + {0, 0.5, 1}) / 2 = 0.5, 0.75, 1 → CI [0.5, 1.0];
    n = 2 + 2 = 4 episodes. A mean with an empty cell is empty."""
    a = score_cell({"task": stat_of([{"case_id": c, "task": 1.0} for c in ("a1", "a2")], lambda r: r["task"])}, "task")
    b = score_cell({"task": stat_of([{"case_id": "b1", "task": 0.0}, {"case_id": "b2", "task": 1.0}],
                             lambda r: r["task"])}, "task")  # fmt: skip
    m = mean_cell([a, b])
    assert (m.value, m.n, m.ci) == (0.75, 4, (0.5, 1.0))
    assert mean_cell([a, score_cell(None, "task")]).value is None


def _row(model: str, module: str, case: str, v: float) -> dict[str, Any]:
    return {"case_id": case, "module": module, "model": model, "policy": f"openai:{model}", "track": "A",
            "ops": "", "protocol": "harness", "budget": 20, "backend": "embedded", "seed": 0, "repeat": 0,
            "status": "done", "task": v, "strict": v, "loc": v, "details": {}}  # fmt: skip


def test_model_avg_and_group_mean_carry_n_and_ci() -> None:
    """Two models, each with two cases per radiology module, all scores 1 (model m1) or 0 (m2). m1's Model Avg.
    Task is 1.00 with n = 6 (three modules × two cases) and CI [1.00, 1.00]; the group's mean over reported is
    (1 + 0) / 2 = 0.50 with n = 12 and CI [0.50, 0.50] (each model's resamples are constant)."""
    modules = ("longitudinal_mri", "brain_mri", "lung_petct")
    rows = [_row(m, mod, f"{mod}_{c}", v) for m, v in (("m1", 1.0), ("m2", 0.0)) for mod in modules for c in "ab"]
    t = table1(rows)
    by_label = {r[0].text(): r for r in t.rows}
    avg_task = by_label["m1"][-3]
    assert (avg_task.value, avg_task.n, avg_task.ci) == (1.0, 6, (1.0, 1.0))
    mean_task = by_label["Mean over reported"][-3]
    assert (mean_task.value, mean_task.n, mean_task.ci) == (0.5, 12, (0.5, 0.5))


def test_funnel_delta_strict_has_a_paired_interval() -> None:
    """Two pairs with Strict differences +1 and 0: ΔStrict 0.5; resampled means 0, 0.5, 1 → CI [0.0, 1.0]."""
    harness = [{"case_id": "a", "strict": 1.0, "response": "x"}, {"case_id": "b", "strict": 0.0, "response": "y"}]
    native = [{"case_id": "a", "strict": 0.0, "response": "x"}, {"case_id": "b", "strict": 0.0, "response": "y"}]
    out = D.funnel(native, harness)
    assert out["delta_strict"] == 0.5 and out["delta_strict_ci"] == pytest.approx((0.0, 1.0))
