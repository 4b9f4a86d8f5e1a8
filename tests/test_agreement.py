"""Inter-run agreement (Cohen's κ, Fleiss' κ, Krippendorff's α) over repeats and AUPRC, on hand-computed data."""

from __future__ import annotations

from typing import Any

import pytest

from copilot.bench.measures.agreement import auprc, cohen_kappa, fleiss_kappa, krippendorff_alpha, repeat_agreement

# four cases, two repeats: (x, x), (x, y), (y, y), (y, y)
FIRST, SECOND = ["x", "x", "y", "y"], ["x", "y", "y", "y"]


def test_cohen_kappa() -> None:
    """p_o = 3/4; p_e = (2/4)(1/4) + (2/4)(3/4) = 1/2; κ = (3/4 − 1/2) / (1 − 1/2) = 1/2."""
    assert cohen_kappa(FIRST, SECOND) == pytest.approx(0.5)
    assert cohen_kappa(["x", "x"], ["x", "x"]) is None  # p_e = 1: undefined


def test_fleiss_kappa() -> None:
    """P_i = 1, 0, 1, 1 → P̄ = 3/4; p_x = 3/8, p_y = 5/8 → P̄_e = 9/64 + 25/64 = 34/64;
    κ = (48/64 − 34/64) / (30/64) = 14/30 = 7/15."""
    items = [list(p) for p in zip(FIRST, SECOND, strict=True)]
    assert fleiss_kappa(items) == pytest.approx(7 / 15)


def test_krippendorff_alpha() -> None:
    """Coincidences: o_xx 2, o_xy = o_yx 1, o_yy 4; n_x 3, n_y 5, n 8. D_o = 2/8; D_e = 2·3·5 / (8·7) = 30/56;
    α = 1 − (1/4) / (30/56) = 1 − 7/15 = 8/15. A unit with one value is not pairable and changes nothing."""
    units = [list(p) for p in zip(FIRST, SECOND, strict=True)]
    assert krippendorff_alpha(units) == pytest.approx(8 / 15)
    assert krippendorff_alpha([*units, ["x"]]) == pytest.approx(8 / 15)


def test_auprc() -> None:
    """Scores 0.9 (pos), 0.8, 0.7 (pos), 0.6: precision 1/1 at the first positive, 2/3 at the second;
    AP = (1 + 2/3) / 2 = 5/6."""
    assert auprc([0.9, 0.8, 0.7, 0.6], [True, False, True, False]) == pytest.approx(5 / 6)
    assert auprc([0.5], [False]) is None


def test_repeat_agreement_per_configuration() -> None:
    """The same four cases × two repeats as answers of one configuration: κ 1/2, Fleiss 7/15, α 8/15."""

    def row(case: str, repeat: int, answer: str) -> dict[str, Any]:
        return {"model": "m", "policy": "baseline", "track": "A", "budget": 20, "case_id": case,
                "module": "brain_mri", "repeat": repeat, "status": "done",
                "details": {"fields": {"label": {"given": answer}}}}  # fmt: skip

    rows = [row(f"c{n}", rep, ans) for rep, answers in enumerate((FIRST, SECOND)) for n, ans in enumerate(answers)]
    (out,) = repeat_agreement(rows).values()
    assert (out["repeats"], out["cases"]) == (2, 4)
    assert out["cohen_kappa"] == pytest.approx(0.5) and out["fleiss_kappa"] == pytest.approx(7 / 15)
    assert out["krippendorff_alpha"] == pytest.approx(8 / 15)
