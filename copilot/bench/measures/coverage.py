"""Exploration coverage of an episode against the hidden truth.

Radiology: every plane the agent was shown (view, axis, offset, field of view) against the lesion's
physical extent: did the agent ever see the lesion, and at which call. Pathology: every slide field the
agent was shown, binned by magnification as PathAgentBench reports exploration (2.5×, 10×, 40×), against
the ground-truth ROIs: a hit at a magnification when a field shown at it overlaps an ROI of the target
class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from copilot.bench.measures.trace_views import RAS_INDEX, in_plane_axes, shown_fields, shown_planes
from copilot.bench.scoring.module_facts import facts_of
from copilot.bench.scoring.scorers import Truth, norm_class
from copilot.cases.pack import CasePack
from copilot.kind_names import PATHOLOGY, RADIOLOGY

MAG_BINS = ("2.5×", "10×", "40×")
GRID = 48  # slide area coverage is counted on a GRID × GRID lattice of the slide


def mag_bin(magnification: float | None) -> str | None:
    """PathAgentBench's magnification levels: < 5× → 2.5×, 5–20× → 10×, ≥ 20× → 40×."""
    if magnification is None:
        return None
    return "2.5×" if magnification < 5 else "10×" if magnification < 20 else "40×"


def _plane_hits(plane: dict[str, Any], extent: dict[str, tuple[float, float]]) -> bool:
    """The plane cuts the lesion's extent and its field of view overlaps the lesion in-plane."""
    lo, hi = extent[plane["axis"]]
    if not lo <= plane["offset"] <= hi:
        return False
    for n, a in enumerate(in_plane_axes(plane["axis"])):
        c, half = plane["center"][RAS_INDEX[a]], plane["fov"][n] / 2.0
        if c + half < extent[a][0] or c - half > extent[a][1]:
            return False
    return True


def radiology_coverage(events: list[dict[str, Any]], truth: Truth) -> dict[str, Any]:
    shown = [p for e in events for p in shown_planes(e)]
    bounds = {a: truth.slice_extent(a, widen=True) for a in "RAS"}
    out: dict[str, Any] = {"kind": "radiology", "planes": len(shown)}
    out["shown"] = {a: sorted({round(p["offset"], 3) for p in shown if p["axis"] == a}) for a in "SRA"}
    if any(v is None for v in bounds.values()):
        return {**out, "extent": None, "lesion_seen": None, "first_seen_seq": None, "first_seen_call": None}
    extent = {a: (float(v[0]), float(v[1])) for a, v in bounds.items() if v is not None}
    hits = [p for p in shown if _plane_hits(p, extent)]
    seqs = sorted({p["seq"] for p in shown})
    first = hits[0]["seq"] if hits else None
    return {
        **out,
        "extent": {a: [round(lo, 3), round(hi, 3)] for a, (lo, hi) in extent.items()},
        "lesion_seen": bool(hits),
        "lesion_planes": len(hits),
        "first_seen_seq": first,
        "first_seen_call": seqs.index(first) + 1 if first is not None else None,
        "seen_axes": sorted({p["axis"] for p in hits}),
    }


def overlaps(region: list[float], polygon: Any) -> bool:
    """A rectangle (x0, y0, x1, y1) overlaps a polygon: a vertex inside the rectangle or a lattice point inside it."""
    x0, y0, x1, y1 = region
    ext = np.asarray(polygon.exterior, dtype=float)
    if ext[:, 0].max() < x0 or ext[:, 0].min() > x1 or ext[:, 1].max() < y0 or ext[:, 1].min() > y1:
        return False
    if np.any((ext[:, 0] >= x0) & (ext[:, 0] <= x1) & (ext[:, 1] >= y0) & (ext[:, 1] <= y1)):
        return True
    return any(polygon.contains(x, y) for x in np.linspace(x0, x1, 9) for y in np.linspace(y0, y1, 9))


def target_rois(case: CasePack, truth: Truth) -> list[Any]:
    """A slide's target regions: those of the class its label names when its module says the label names one
    (none on a negative label), else its tumour regions."""
    facts = facts_of(case.module)
    if facts is not None and facts.roi_label is not None:
        field, negative = facts.roi_label
        target = truth.data.get(field)
        return [a for a in truth.annotations if norm_class(a.cls) == target] if target != negative else []
    return [a for a in truth.annotations if a.cls == "Tumor"]


def pathology_coverage(events: list[dict[str, Any]], truth: Truth, case: CasePack) -> dict[str, Any]:
    rois = target_rois(case, truth)
    fields = [f for e in events for f in shown_fields(e)]
    width, height = _slide_size(events)
    bins: dict[str, Any] = {}
    for b in MAG_BINS:
        mine = [f for f in fields if mag_bin(f["magnification"]) == b]
        hit_seqs = [f["seq"] for f in mine if any(overlaps(f["region"], r) for r in rois)]
        seen = np.zeros((GRID, GRID), dtype=bool)
        for f in mine:
            x0, y0, x1, y1 = f["region"]
            if width and height:
                seen[
                    int(max(0, y0) / height * GRID) : int(np.ceil(min(y1, height) / height * GRID)),
                    int(max(0, x0) / width * GRID) : int(np.ceil(min(x1, width) / width * GRID)),
                ] = True
        bins[b] = {
            "fields": len(mine),
            "hit": (bool(hit_seqs) if rois else None),
            "first_hit_seq": hit_seqs[0] if hit_seqs else None,
            "area_fraction": round(float(seen.mean()), 6),
        }
    regions = [[f["seq"], f["magnification"], *f["region"]] for f in fields]
    return {"kind": "pathology", "positive": bool(rois), "bins": bins, "fields": regions, "slide": [width, height]}


def _slide_size(events: list[dict[str, Any]]) -> tuple[float, float]:
    for e in events:
        dims = (e.get("state") or {}).get("dimensions")
        if dims:
            return float(dims[0]), float(dims[1])
    return 0.0, 0.0


def episode_coverage(events: list[dict[str, Any]], case: CasePack) -> dict[str, Any]:
    """Coverage from the calls that returned images to the agent. Radiology counts the system's opening views
    (they are attached to the prompt); pathology hit rates count only the fields the agent itself asked for
    (system actions, such as the slide overview of `load_case` or the per-round screenshot, are not
    exploration: PathAgentBench's hit rates measure where the agent navigated)."""
    shown = [e for e in events if e.get("type") == "handler_call" and e.get("ok")]
    measure = COVERAGE.get(case.kind)
    return measure(shown, Truth(case), case) if measure is not None else {}


COVERAGE: dict[str, Callable[[list[dict[str, Any]], Truth, CasePack], dict[str, Any]]] = {  # per viewer kind
    RADIOLOGY: lambda shown, truth, case: radiology_coverage(shown, truth),
    PATHOLOGY: lambda shown, truth, case: pathology_coverage([e for e in shown if e.get("actor") != "system"],
                                                             truth, case),
}  # fmt: skip
