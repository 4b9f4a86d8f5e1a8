"""Algorithm 1's paired test: ΔY (Strict) and ΔS (each dimension) with paired bootstrap intervals and a
sign-flip permutation p over (case, repeat, seed) pairs; the same in the report's funnel table."""

from __future__ import annotations

from typing import Any

import pytest

from copilot.bench.measures import dimensions as D
from copilot.bench.report.publication import funnel_table


def _row(case: str, strict: float, v: float) -> dict[str, Any]:
    return {"case_id": case, "strict": strict, "response": f"r{strict}",
            "process": {"interventions": [], "dimensions": {"V": {"score": v}}}}  # fmt: skip


def test_paired_test_by_hand() -> None:
    """Pairs (harness, paper): Strict (1, 0), (1, 0), (0, 0) → ΔY [1, 1, 0], mean 2/3; sign flips of the two
    non-zero differences give means 2/3, 0, 0, −2/3 → |mean| ≥ 2/3 in 2 of 4 → p 0.5. V (1, 0.5), (0.5, 0.5),
    (1, 0.5) → ΔS_V [0.5, 0, 0.5], mean 1/3, p 0.5 by the same count. Intervals: paired bootstrap of those lists."""
    pairs = [(_row("a", 1.0, 1.0), _row("a", 0.0, 0.5)), (_row("b", 1.0, 0.5), _row("b", 0.0, 0.5)),
             (_row("c", 0.0, 1.0), _row("c", 0.0, 0.5))]  # fmt: skip
    f = D.funnel_pairs(pairs)
    assert f["delta_strict"] == pytest.approx(2 / 3) and f["delta_strict_p"] == 0.5
    assert f["delta_dimensions"]["V"] == pytest.approx(1 / 3) and f["delta_dimensions_p"]["V"] == 0.5
    lo, hi = f["delta_dimensions_ci"]["V"]
    assert 0.0 <= lo <= 1 / 3 <= hi <= 0.5 and f["delta_dimensions_pairs"]["V"] == 3
    t = funnel_table({"m · harness": f})
    assert [r[1].text() for r in t.rows] == ["ΔY Strict", "ΔS V"]
    assert t.rows[0][6].value == 0.5 and t.rows[1][5].ci == pytest.approx((lo, hi))
