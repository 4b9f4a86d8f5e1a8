"""Tumour response from lesion measurements at successive time points: RECIST 1.1 (sum of diameters) and RANO 2.0
for enhancing disease (sum of products of perpendicular diameters), each with the rule that decided the category.

RECIST 1.1 (Eisenhauer et al., Eur J Cancer 2009): up to five target lesions, each measurable at baseline (long
axis ≥ 10 mm; a lymph node by its short axis ≥ 15 mm); the sum of diameters counts a node's short axis and any
other lesion's long axis. CR: every target gone and every node below 10 mm short axis; PR: at least 30 % below the
baseline sum; PD: at least 20 % and at least 5 mm above the smallest sum so far (the nadir, baseline included),
or a new lesion, or unequivocal progression of non-target disease; otherwise SD. A target not measured at the time
point makes it NE unless it is PD anyway.

RANO 2.0 (Wen et al., J Clin Oncol 2023), enhancing disease: measurable = both perpendicular diameters ≥ 10 mm;
the sum of products of the target lesions' perpendicular diameters. CR: all enhancing disease gone, no new lesion,
no corticosteroids beyond physiological doses, clinically stable or better; PR: at least 50 % below baseline;
PD: at least 25 % above the nadir, a new measurable lesion, unequivocal non-target progression or clinical
deterioration; otherwise SD. A CR or PR stands once a later scan (≥ 4 weeks) confirms it: `confirm` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["target", "non_target", "new"]
NonTarget = Literal["present", "absent", "progressed"]


class CriteriaError(ValueError):
    """Measurements the criteria cannot assess (said in the message; nothing is computed)."""


@dataclass(frozen=True)
class Lesion:
    """One lesion at one time point: its tracking name, role, long and short (perpendicular) axes in mm (0 when it
    has gone, None when not measured), whether it is a lymph node, and a non-target lesion's status."""

    name: str
    role: Role = "target"
    long_mm: float | None = None
    short_mm: float | None = None
    node: bool = False
    status: NonTarget = "present"


@dataclass(frozen=True)
class TimePoint:
    """The lesions measured at one examination; `steroids_increased`/`clinically_worse` feed RANO's clinical
    terms, `steroids` whether corticosteroids beyond physiological doses are given."""

    label: str
    lesions: tuple[Lesion, ...]
    steroids: bool = False
    steroids_increased: bool = False
    clinically_worse: bool = False


@dataclass(frozen=True)
class Assessment:
    """The response at the last time point, the sums it was computed from and the rule that decided it."""

    criteria: str
    time_point: str
    measure: str  # what is summed: "sum of diameters (mm)" or "sum of products (mm²)"
    sums: dict[str, float]  # per time point label, in order
    baseline: float
    nadir: float
    nadir_time_point: str
    current: float | None
    change_from_baseline_pct: float | None
    change_from_nadir_pct: float | None
    change_from_nadir: float | None
    new_lesions: list[str]
    category: str  # CR, PR, SD, PD, NE
    rule: str
    confirm: bool = False  # a CR or PR that a later scan must confirm (RANO)
    per_lesion: dict[str, list[float | None]] = field(default_factory=dict)


def _pct(value: float, reference: float) -> float | None:
    return round(100.0 * (value - reference) / reference, 2) if reference > 0 else None


def _targets(point: TimePoint) -> dict[str, Lesion]:
    return {les.name: les for les in point.lesions if les.role == "target"}


def _check_series(points: list[TimePoint], most: int | None, measurable: Any) -> list[str]:
    """The target lesion names, after checking the baseline (at least two time points, 1..most measurable targets)."""
    if len(points) < 2:
        raise CriteriaError("a response needs a baseline and at least one follow-up time point")
    base = _targets(points[0])
    if not base:
        raise CriteriaError(f"no target lesion at baseline {points[0].label!r}")
    if most is not None and len(base) > most:
        raise CriteriaError(f"{len(base)} target lesions at baseline; the criteria allow at most {most}")
    for les in base.values():
        why = measurable(les)
        if why:
            raise CriteriaError(f"target lesion {les.name!r} is not measurable at baseline: {why}")
    return list(base)


def _recist_diameter(les: Lesion | None) -> float | None:
    if les is None:
        return None
    return les.short_mm if les.node else les.long_mm


def _recist_measurable(les: Lesion) -> str:
    if les.node:
        return "" if (les.short_mm or 0) >= 15 else f"a node's short axis {les.short_mm} mm is below 15 mm"
    return "" if (les.long_mm or 0) >= 10 else f"long axis {les.long_mm} mm is below 10 mm"


def _rano_product(les: Lesion | None) -> float | None:
    if les is None or les.long_mm is None or les.short_mm is None:
        return None
    return les.long_mm * les.short_mm


def _rano_measurable(les: Lesion) -> str:
    if les.long_mm is None or les.short_mm is None:
        return "both perpendicular diameters are needed"
    return "" if min(les.long_mm, les.short_mm) >= 10 else "a perpendicular diameter is below 10 mm"


def _sums(points: list[TimePoint], names: list[str], size: Any) -> tuple[list[float | None], dict[str, Any]]:
    """Each time point's sum over the baseline targets (None when one is not measured), and each lesion's sizes."""
    sums: list[float | None] = []
    per: dict[str, list[float | None]] = {n: [] for n in names}
    for point in points:
        found = _targets(point)
        sizes = [size(found.get(n)) for n in names]
        for n, s in zip(names, sizes, strict=True):
            per[n].append(s)
        sums.append(None if any(s is None for s in sizes) else round(float(sum(sizes)), 4))
    return sums, per


def _frame(criteria: str, measure: str, points: list[TimePoint], sums: list[float | None],
           per: dict[str, list[float | None]]) -> dict[str, Any]:  # fmt: skip
    """What both criteria report: baseline, nadir (smallest sum before the current point), changes."""
    known = [(p.label, s) for p, s in zip(points[:-1], sums[:-1], strict=True) if s is not None]
    nadir_label, nadir = min(known, key=lambda x: x[1])
    base, current = sums[0] or 0.0, sums[-1]
    return {
        "criteria": criteria, "time_point": points[-1].label, "measure": measure,
        "sums": {p.label: s for p, s in zip(points, sums, strict=True) if s is not None},
        "baseline": base, "nadir": nadir, "nadir_time_point": nadir_label, "current": current,
        "change_from_baseline_pct": None if current is None else _pct(current, base),
        "change_from_nadir_pct": None if current is None else _pct(current, nadir),
        "change_from_nadir": None if current is None else round(current - nadir, 4),
        "new_lesions": [les.name for les in points[-1].lesions if les.role == "new"], "per_lesion": per,
    }  # fmt: skip


def _done(frame: dict[str, Any], category: str, rule: str, confirm: bool = False) -> Assessment:
    return Assessment(**frame, category=category, rule=rule, confirm=confirm)


def recist(points: list[TimePoint]) -> Assessment:
    """RECIST 1.1 response of the last time point against the baseline (the first) and the nadir."""
    names = _check_series(points, 5, _recist_measurable)
    sums, per = _sums(points, names, _recist_diameter)
    f = _frame("RECIST 1.1", "sum of diameters (mm)", points, sums, per)
    last = points[-1]
    current, base, nadir = f["current"], float(f["baseline"]), float(f["nadir"])
    non_target = [les for les in last.lesions if les.role == "non_target"]
    if f["new_lesions"]:
        return _done(f, category="PD", rule=f"new lesion(s): {', '.join(f['new_lesions'])}")
    if any(les.status == "progressed" for les in non_target):
        return _done(f, category="PD", rule="unequivocal progression of non-target disease")
    if current is None:
        missing = [n for n in names if _recist_diameter(_targets(last).get(n)) is None]
        return _done(f, category="NE", rule=f"target lesion(s) not measured: {', '.join(missing)}")
    grew = float(current) - nadir
    if grew >= 0.2 * nadir and grew >= 5.0:
        rule = f"sum {current} mm is {f['change_from_nadir_pct']} % and {round(grew, 2)} mm above the nadir " \
               f"{nadir} mm ({f['nadir_time_point']}): ≥ 20 % and ≥ 5 mm"
        return _done(f, category="PD", rule=rule)
    nodes_small = all((les.short_mm or 0) < 10 for les in last.lesions if les.node)
    targets_gone = all((_targets(last)[n].long_mm or 0) == 0 or _targets(last)[n].node for n in names)
    if targets_gone and nodes_small:
        if non_target and any(les.status == "present" for les in non_target):
            return _done(f, category="PR", rule="targets gone, non-target disease persists (non-CR/non-PD)")
        return _done(f, category="CR", rule="every target lesion gone, every node below 10 mm short axis")
    if float(current) <= 0.7 * base:
        rule = f"sum {current} mm is {f['change_from_baseline_pct']} % from the baseline {base} mm: ≥ 30 % decrease"
        return _done(f, category="PR", rule=rule)
    return _done(f, category="SD", rule="neither a 30 % decrease from baseline nor a 20 % and 5 mm "
                      f"increase from the nadir (baseline {f['change_from_baseline_pct']} %, nadir "
                      f"{f['change_from_nadir_pct']} %)")  # fmt: skip


def rano(points: list[TimePoint]) -> Assessment:
    """RANO 2.0 response (enhancing disease) of the last time point against the baseline and the nadir."""
    names = _check_series(points, None, _rano_measurable)
    sums, per = _sums(points, names, _rano_product)
    f = _frame("RANO 2.0", "sum of products of perpendicular diameters (mm²)", points, sums, per)
    last = points[-1]
    current, base, nadir = f["current"], float(f["baseline"]), float(f["nadir"])
    non_target = [les for les in last.lesions if les.role == "non_target"]
    new_measurable = [les.name for les in last.lesions if les.role == "new" and not _rano_measurable(les)]
    if new_measurable:
        return _done({**f, "new_lesions": new_measurable}, category="PD",
                          rule=f"new measurable enhancing lesion(s): {', '.join(new_measurable)}")  # fmt: skip
    if any(les.status == "progressed" for les in non_target):
        return _done(f, category="PD", rule="unequivocal progression of non-target disease")
    if last.clinically_worse:
        return _done(f, category="PD", rule="clinical deterioration")
    if current is None:
        missing = [n for n in names if _rano_product(_targets(last).get(n)) is None]
        return _done(f, category="NE", rule=f"target lesion(s) not measured: {', '.join(missing)}")
    if nadir == 0 and float(current) > 0:
        return _done(f, category="PD", rule=f"enhancing disease back ({current} mm²) after it had gone")
    if nadir > 0 and float(current) >= 1.25 * nadir:
        rule = f"sum of products {current} mm² is {f['change_from_nadir_pct']} % above the nadir {nadir} mm² " \
               f"({f['nadir_time_point']}): ≥ 25 %"
        return _done(f, category="PD", rule=rule)
    stable_care = not last.steroids_increased
    if float(current) == 0 and all(les.status == "absent" for les in non_target) and not last.steroids:
        return _done(f, category="CR", rule="all enhancing disease gone, no corticosteroids", confirm=True)
    if float(current) <= 0.5 * base and stable_care:
        rule = f"sum of products {current} mm² is {f['change_from_baseline_pct']} % from the baseline {base} mm²: " \
               "≥ 50 % decrease, corticosteroids not increased"
        return _done(f, category="PR", rule=rule, confirm=True)
    return _done(f, category="SD", rule="neither a 50 % decrease from baseline nor a 25 % increase from "
                      f"the nadir (baseline {f['change_from_baseline_pct']} %, nadir {f['change_from_nadir_pct']} %)")
