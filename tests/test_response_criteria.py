"""RECIST 1.1 and RANO 2.0 responses computed from lesion measurements, each case worked by hand here."""

from __future__ import annotations

import pytest

from copilot.tools.response_criteria import CriteriaError, Lesion, TimePoint, rano, recist


def _baseline() -> TimePoint:
    """Two target lesions (long axes 40 and 30 mm) and a target node (short axis 30 mm): sum 40 + 30 + 30 = 100 mm."""
    return TimePoint("baseline", (Lesion("liver 1", long_mm=40), Lesion("lung 1", long_mm=30),
                                  Lesion("node 1", long_mm=35, short_mm=30, node=True),
                                  Lesion("bone", role="non_target")))  # fmt: skip


def _follow(label: str, liver: float | None, lung: float, node: float, *more: Lesion) -> TimePoint:
    return TimePoint(label, (Lesion("liver 1", long_mm=liver), Lesion("lung 1", long_mm=lung),
                             Lesion("node 1", long_mm=node + 3, short_mm=node, node=True),
                             Lesion("bone", role="non_target"), *more))  # fmt: skip


def test_recist_35_percent_smaller_is_a_partial_response() -> None:
    """26 + 20 + 19 = 65 mm against 100 mm: −35 % → PR by the 30 % rule."""
    a = recist([_baseline(), _follow("week 8", 26, 20, 19)])
    assert (a.baseline, a.current, a.change_from_baseline_pct) == (100, 65, -35.0)
    assert a.category == "PR" and "≥ 30 % decrease" in a.rule
    assert a.per_lesion["node 1"] == [30, 19]  # a node counts by its short axis


def test_recist_25_percent_and_6_mm_above_the_nadir_is_progression() -> None:
    """Nadir 10 + 8 + 6 = 24 mm (week 8); week 16: 13 + 10 + 7 = 30 mm, +6 mm and +25 % → PD (while still 70 % below
    the baseline); at 12 + 9 + 7.5 = 28.5 mm (+4.5 mm, +18.75 %) it is not PD but PR from baseline."""
    nadir = _follow("week 8", 10, 8, 6)
    a = recist([_baseline(), nadir, _follow("week 16", 13, 10, 7)])
    assert (a.nadir, a.nadir_time_point, a.current) == (24, "week 8", 30)
    assert (a.change_from_nadir, a.change_from_nadir_pct) == (6, 25.0)
    assert a.category == "PD" and "≥ 20 % and ≥ 5 mm" in a.rule
    b = recist([_baseline(), nadir, _follow("week 16", 12, 9, 7.5)])
    assert (b.change_from_nadir, b.change_from_nadir_pct, b.category) == (4.5, 18.75, "PR")


def test_recist_a_new_lesion_is_progression_whatever_the_sum() -> None:
    a = recist([_baseline(), _follow("week 8", 26, 20, 19, Lesion("liver 2", role="new", long_mm=6))])
    assert a.category == "PD" and a.rule == "new lesion(s): liver 2" and a.new_lesions == ["liver 2"]


def test_recist_complete_response_stable_disease_and_not_evaluable() -> None:
    gone = TimePoint("week 24", (Lesion("liver 1", long_mm=0), Lesion("lung 1", long_mm=0),
                                 Lesion("node 1", long_mm=9, short_mm=8, node=True),
                                 Lesion("bone", role="non_target", status="absent")))  # fmt: skip
    assert recist([_baseline(), gone]).category == "CR"  # the node counts 8 mm but is below 10 mm: normal
    assert recist([_baseline(), _follow("week 8", 35, 28, 27)]).category == "SD"  # 90 mm: −10 %
    missing = recist([_baseline(), _follow("week 8", None, 20, 19)])
    assert missing.category == "NE" and "liver 1" in missing.rule


def test_recist_refuses_an_unmeasurable_baseline() -> None:
    small = TimePoint("baseline", (Lesion("liver 1", long_mm=8),))
    with pytest.raises(CriteriaError, match="below 10 mm"):
        recist([small, small])
    node = TimePoint("baseline", (Lesion("node", long_mm=20, short_mm=12, node=True),))
    with pytest.raises(CriteriaError, match="below 15 mm"):
        recist([node, node])
    with pytest.raises(CriteriaError, match="baseline and at least one follow-up"):
        recist([_baseline()])


def _rano_point(label: str, l1: tuple[float, float], l2: tuple[float, float], *more: Lesion,
                **clinical: bool) -> TimePoint:  # fmt: skip
    return TimePoint(label, (Lesion("enhancing 1", long_mm=l1[0], short_mm=l1[1]),
                             Lesion("enhancing 2", long_mm=l2[0], short_mm=l2[1]), *more), **clinical)  # fmt: skip


def test_rano_products_half_then_a_quarter_above_the_nadir() -> None:
    """Baseline 30×20 + 20×15 = 600 + 300 = 900 mm²; week 8: 20×15 + 15×10 = 450 mm², −50 % → PR (to be confirmed);
    week 16: 25×18 + 16×12 = 450 + 192 = 642 mm², +42.67 % from the nadir 450 → PD; 22×16 + 15×10 = 502 mm²
    (+11.56 %) → SD."""
    base = _rano_point("post-RT", (30, 20), (20, 15))
    week8 = _rano_point("week 8", (20, 15), (15, 10))
    pr = rano([base, week8])
    assert (pr.baseline, pr.current, pr.change_from_baseline_pct, pr.category, pr.confirm) == (900, 450, -50.0,
                                                                                              "PR", True)  # fmt: skip
    pd = rano([base, week8, _rano_point("week 16", (25, 18), (16, 12))])
    assert (pd.nadir, pd.current, pd.change_from_nadir_pct, pd.category) == (450, 642, 42.67, "PD")
    assert "≥ 25 %" in pd.rule
    sd = rano([base, week8, _rano_point("week 16", (22, 16), (15, 10))])
    assert (sd.current, sd.change_from_nadir_pct, sd.category) == (502, 11.56, "SD")


def test_rano_new_lesions_steroids_and_clinical_status() -> None:
    base = _rano_point("post-RT", (30, 20), (20, 15))
    small_new = Lesion("new focus", role="new", long_mm=8, short_mm=6)  # not measurable: not PD by itself
    assert rano([base, _rano_point("week 8", (29, 20), (20, 15), small_new)]).category == "SD"
    big_new = Lesion("new focus", role="new", long_mm=12, short_mm=11)
    assert rano([base, _rano_point("week 8", (29, 20), (20, 15), big_new)]).category == "PD"
    assert rano([base, _rano_point("week 8", (10, 10), (10, 10), steroids_increased=True)]).category == "SD"
    worse = rano([base, _rano_point("week 8", (29, 20), (20, 15), clinically_worse=True)])
    assert (worse.category, worse.rule) == ("PD", "clinical deterioration")
    gone = _rano_point("week 8", (0, 0), (0, 0))
    assert rano([base, gone]).category == "CR" and rano([base, gone]).confirm
    assert rano([base, _rano_point("week 8", (0, 0), (0, 0), steroids=True)]).category == "PR"
    with pytest.raises(CriteriaError, match="below 10 mm"):
        rano([_rano_point("b", (30, 8), (20, 15)), base])
