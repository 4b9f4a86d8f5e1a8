"""`bench perturb`'s statistics balanced by configuration and module (seed 001 balances by benchmark), with the
localisation's confusion matrix and each dimension's recall, worked by hand."""

from __future__ import annotations

from typing import Any

import pytest

from copilot.bench.measures.perturb import fault_statistics
from copilot.bench.report.publication import perturbation_table


def _row(case: str, module: str, dims: dict[str, float], fault: str | None = None) -> dict[str, Any]:
    return {"model": "m", "case_id": case, "module": module, "perturbation": fault,
            "process": {"dimensions": {d: {"score": v} for d, v in dims.items()}}}  # fmt: skip


def test_balanced_table_with_its_confusion_matrix() -> None:
    """stale_view (target V): brain b1–b3 drop V 0.5 and E 0.1 (detected, margin 0.4, predicted V); lung l1 drops
    V 0 and E 0.2 (missed, margin −0.2, predicted E). Pooled: detection 3/4, drop 1.5/4 = 0.375, margin
    (3·0.4 − 0.2)/4 = 0.25. Balanced over the strata (m, brain) and (m, lung): detection (1 + 0)/2 = 0.5, drop
    (0.5 + 0)/2 = 0.25, margin (0.4 − 0.2)/2 = 0.1. wrong_series (target E) on b1: E 0.3, V 0 → predicted E.
    Confusion V → {V: 3, E: 1}, E → {V: 0, E: 1}; recall V 3/4, E 1; balanced accuracy (0.75 + 1)/2 = 0.875."""
    clean = [_row(c, "brain_mri", {"V": 1.0, "E": 1.0}) for c in ("b1", "b2", "b3")]
    clean.append(_row("l1", "lung_petct", {"V": 1.0, "E": 1.0}))
    perturbed = [_row(c, "brain_mri", {"V": 0.5, "E": 0.9}, "stale_view") for c in ("b1", "b2", "b3")]
    perturbed.append(_row("l1", "lung_petct", {"V": 1.0, "E": 0.8}, "stale_view"))
    perturbed.append(_row("b1", "brain_mri", {"V": 1.0, "E": 0.7}, "wrong_series"))
    out = fault_statistics(clean, perturbed)
    sv = out["faults"]["stale_view"]
    assert (sv["detection_rate_pooled"], sv["target_drop_pooled"]) == (0.75, pytest.approx(0.375))
    assert sv["selectivity_margin_pooled"] == pytest.approx(0.25)
    assert (sv["detection_rate"], sv["target_drop"]) == (0.5, pytest.approx(0.25))
    assert sv["selectivity_margin"] == pytest.approx(0.1)
    assert [(s["module"], s["pairs"]) for s in sv["strata"]] == [("brain_mri", 3), ("lung_petct", 1)]
    loc = out["localisation"]
    assert loc["confusion"] == {"V": {"E": 1, "V": 3}, "E": {"E": 1, "V": 0}}
    assert loc["recall"] == {"E": 1.0, "V": 0.75} and loc["balanced_accuracy"] == pytest.approx(0.875)
    t = perturbation_table(out)
    assert [r[0].text() for r in t.rows] == ["wrong_series", "stale_view"] and t.rows[1][3].value == 0.5
    assert "recall: E 1.00, V 0.75" in t.caption and "V → E 1, V 3" in t.caption
