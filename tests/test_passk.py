"""One Pass@k: the unbiased estimator from n ≥ k runs (refused when n < k), with τ-bench's pass^k beside it;
the table's n is cases, the runs per case shown apart, and its rows name every key that differs."""

from __future__ import annotations

from typing import Any

import pytest

from copilot.bench.scoring.stats import pass_at_k, pass_hat_k
from copilot.bench.tables.paper_studies import passk_table


def test_estimators_by_hand() -> None:
    """n 5 runs, c 2 successes, k 3: Pass@3 = 1 − C(3, 3)/C(5, 3) = 1 − 1/10 = 0.9; pass^3 = C(2, 3)/10 = 0;
    k 2: Pass@2 = 1 − C(3, 2)/C(5, 2) = 1 − 3/10 = 0.7, pass^2 = C(2, 2)/10 = 0.1; k 1: both c/n = 0.4."""
    assert pass_at_k(2, 5, 3) == pytest.approx(0.9) and pass_hat_k(2, 5, 3) == 0.0
    assert pass_at_k(2, 5, 2) == pytest.approx(0.7) and pass_hat_k(2, 5, 2) == pytest.approx(0.1)
    assert pass_at_k(2, 5, 1) == pass_hat_k(2, 5, 1) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="Pass@3 needs at least 3 runs of a case; it has 2"):
        pass_at_k(1, 2, 3)
    with pytest.raises(ValueError, match="successes"):
        pass_hat_k(4, 3, 1)


def _row(case: str, task: float, strict: float, repeat: int, **kw: Any) -> dict[str, Any]:
    base = {"case_id": case, "module": "brain_mri", "model": "m", "policy": "openai:m", "track": "A", "ops": "",
            "protocol": "harness", "budget": 20, "backend": "embedded", "seed": 0, "repeat": repeat,
            "status": "done", "task": task, "strict": strict, "loc": None,
            "details": {"fields": {"label": {"given": "A" if task else "B"}}}}  # fmt: skip
    return {**base, **kw}


def test_table_from_repeats_by_hand() -> None:
    """Case a: Task [1, 0, 0], Strict [1, 0, 0]; case b: Task [1, 1, 1, 1] (4 runs), Strict [1, 1, 0, 0].
    k = 3 (the fewest runs). Pass@1 (Task) = (1/3 + 1)/2 = 2/3; Pass@3 (Task): a 1 − C(2,3)/C(3,3) = 1, b 1 → 1;
    Pass@3 (Strict): a 1, b 1 − C(2,3)/C(4,3) = 1 → 1; pass^3 (Strict): a C(1,3)/1 = 0, b C(2,3)/4 = 0 → 0;
    agreement: a 2/3, b 1 → 5/6. n = 2 cases, runs 3–4. Pass@1 ≤ Pass@3, never below."""
    rows = [_row("a", t, t, i) for i, t in enumerate((1.0, 0.0, 0.0))]
    rows += [_row("b", 1.0, s, i) for i, s in enumerate((1.0, 1.0, 0.0, 0.0))]
    (row,) = passk_table(rows).rows
    assert [c.text() for c in row[:5]] == ["m", "Brain MRI", "2", "3–4", "3"]
    assert [c.value for c in row[5:9]] == [pytest.approx(2 / 3), 1.0, 1.0, 0.0]
    assert row[9].value == pytest.approx(5 / 6) and row[6].n == 2


def test_rows_carry_every_differing_key() -> None:
    """Six configurations of one model differing in track, operation set and protocol get six labels."""
    rows = []
    for track, ops, protocol in (("A", "", "harness"), ("A", "", "paper"), ("B", "segmentation", "harness"),
                                 ("B", "segmentation", "paper"), ("B", "registration", "harness"),
                                 ("B", "registration", "paper")):  # fmt: skip
        rows += [_row("a", 1.0, 1.0, i, track=track, ops=ops, protocol=protocol) for i in range(2)]
    labels = [r[0].text() for r in passk_table(rows).rows]
    assert len(set(labels)) == 6 and "m (Track B, registration, paper)" in labels
    assert "m (Track A, harness)" in labels
