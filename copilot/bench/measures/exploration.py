"""PathAgentBench's autonomous-exploration measure (seed 003, Task 3 Mode B): tile-level hits under hierarchical
top-K retention, K = 6, 3, 2 at 2.5×, 10× and 40×, with a random-sampling baseline on the same slide.

A tile is a field the agent was shown at a magnification level (the system's opening views excluded; a field
showing the whole slide is its level's selection and every level's above it, the whole-slide tiling). The
agent's own visiting order stands in for its tile scores: at each level the first K distinct fields that lie
inside a retained field of the level above are retained; a level the agent skipped retains nothing, and so
neither do the levels below it, so the hit rates cannot rise with magnification. A level hits when a
retained tile overlaps a target region. The random baseline samples K tiles per level uniformly from a
grid of the slide (tiles the size of a field at that magnification), children inside the retained parents,
and reports the probability of a hit at each level (Monte Carlo, fixed seed).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from copilot.bench.measures.configs import config_of, label
from copilot.bench.measures.coverage import MAG_BINS, mag_bin, overlaps, target_rois
from copilot.bench.measures.trace_views import shown_fields
from copilot.bench.scoring.scorers import Truth
from copilot.cases.pack import CasePack

K = {"2.5×": 6, "10×": 3, "40×": 2}
LEVEL_MAG = {"2.5×": 2.5, "10×": 10.0, "40×": 40.0}
DRAWS = 400
Region = tuple[float, float, float, float]


def _centre_in(child: Region, parent: Region) -> bool:
    cx, cy = (child[0] + child[2]) / 2.0, (child[1] + child[3]) / 2.0
    return parent[0] <= cx <= parent[2] and parent[1] <= cy <= parent[3]


def retain(fields: list[tuple[str, Region]]) -> dict[str, list[Region]]:
    """Top-K retention per level in visiting order, nested in the retained tiles of the level above; a level the
    agent skipped retains nothing, so nothing is retained below it (seed 003's hierarchy: a tile is scored only
    inside a retained parent)."""
    kept: dict[str, list[Region]] = {}
    parents: list[Region] | None = None  # None: the top level, which has no parent
    for level in MAG_BINS:
        mine: list[Region] = []
        for lv, region in fields:
            if lv != level or region in mine:
                continue
            if parents is not None and not any(_centre_in(region, p) for p in parents):
                continue
            if len(mine) < K[level]:
                mine.append(region)
        kept[level] = mine
        parents = mine
    return kept


def level_hits(kept: dict[str, list[Region]], hit: Callable[[Region], bool]) -> dict[str, dict[str, Any]]:
    """Per level: K, tiles retained, retained tiles over a target region, and whether the level hit."""
    out = {}
    for level in MAG_BINS:
        hits = sum(1 for r in kept[level] if hit(r))
        out[level] = {"K": K[level], "retained": len(kept[level]), "hits": hits, "hit": hits > 0}
    return out


def grid(slide: tuple[float, float], tile: tuple[float, float], within: Region | None = None) -> list[Region]:
    """The slide's tiles of one size (whose centres lie within a parent tile, when given); only the parent's
    span of the lattice is visited, so a 40× level of a large slide stays cheap."""
    w, h = slide
    tw, th = tile
    x0, y0, x1, y1 = within if within is not None else (0.0, 0.0, w, h)
    tiles = []
    for j in range(max(0, int(y0 // th) - 1), min(math.ceil(h / th), int(y1 // th) + 2)):
        for i in range(max(0, int(x0 // tw) - 1), min(math.ceil(w / tw), int(x1 // tw) + 2)):
            r = (i * tw, j * th, min((i + 1) * tw, w), min((j + 1) * th, h))
            if within is None or _centre_in(r, within):
                tiles.append(r)
    return tiles


def random_baseline(
    slide: tuple[float, float], tiles: dict[str, tuple[float, float]], hit: Callable[[Region], bool],
    draws: int = DRAWS, seed: int = 0,
) -> dict[str, float]:  # fmt: skip
    """Probability of a hit per level for uniform top-K sampling under the same hierarchy."""
    rng = random.Random(seed)
    cache: dict[Region, bool] = {}

    def is_hit(r: Region) -> bool:
        if r not in cache:
            cache[r] = hit(r)
        return cache[r]

    children: dict[tuple[str, Region | None], list[Region]] = {}
    counts: dict[str, int] = defaultdict(int)
    for _ in range(draws):
        parents: list[Region | None] = [None]
        for level in MAG_BINS:
            pool: list[Region] = []
            for p in parents:
                if (level, p) not in children:
                    children[(level, p)] = grid(slide, tiles[level], p)
                pool += children[(level, p)]
            chosen = rng.sample(pool, min(K[level], len(pool)))
            counts[level] += any(is_hit(r) for r in chosen)
            parents = list(chosen)  # nothing drawn: nothing below
    return {level: counts[level] / draws for level in MAG_BINS}


def level_fields(agent: list[dict[str, Any]], slide: tuple[float, float]) -> list[tuple[str, Region]]:
    """The agent's fields as (level, region) in visiting order. A field showing the whole slide is that level's
    selection and every level's above it (seed 003 scores each level from the whole-slide tiling, so a small
    slide shown whole at 10× was also seen whole at 2.5×); other fields count at their own level."""
    out: list[tuple[str, Region]] = []
    for f in agent:
        level = mag_bin(f["magnification"])
        if level is None:
            continue
        region: Region = tuple(f["region"])  # type: ignore[assignment]
        if slide[0] and slide[1] and _whole(region, slide):
            out += [(lv, region) for lv in MAG_BINS[: MAG_BINS.index(level) + 1]]
        else:
            out.append((level, region))
    return out


def _whole(region: Region, slide: tuple[float, float]) -> bool:
    """The field shows the whole slide (within a pixel at each edge)."""
    return region[0] <= 1.0 and region[1] <= 1.0 and region[2] >= slide[0] - 1.0 and region[3] >= slide[1] - 1.0


def hierarchical_hits(events: list[dict[str, Any]], case: CasePack, truth: Truth | None = None) -> dict[str, Any]:
    """The episode's hierarchical hits and the random baseline on its slide (positive slides only)."""
    truth = truth if truth is not None else Truth(case)
    rois = target_rois(case, truth)
    calls = [e for e in events if e.get("type") == "handler_call" and e.get("ok")]
    fields_all = [f for e in calls for f in shown_fields(e)]
    if not rois or not fields_all:
        return {"positive": bool(rois), "levels": None, "random": None}
    agent = [f for e in calls if e.get("actor") == "agent" for f in shown_fields(e)]

    def hit(r: Region) -> bool:
        return any(overlaps(list(r), roi) for roi in rois)

    slide = next(
        ((float(d[0]), float(d[1])) for e in calls if (d := (e.get("state") or {}).get("dimensions"))), (0.0, 0.0)
    )
    fields = level_fields(agent, slide)
    ref = fields_all[0]
    x0, y0, x1, y1 = ref["region"]
    mag = float(ref["magnification"] or 1.0)
    tiles = {lv: ((x1 - x0) * mag / m, (y1 - y0) * mag / m) for lv, m in LEVEL_MAG.items()}
    return {
        "positive": True,
        "levels": level_hits(retain(fields), hit),
        "random": random_baseline(slide, tiles, hit) if slide[0] and slide[1] else None,
    }


def hit_rates(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per run configuration: unconditional hit rate per level, conditional on a hit at the level above, and the
    random baseline, over positive slides."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        h = (r.get("process") or {}).get("hierarchical_hits")
        if h and h.get("levels"):
            groups[label(config_of(r))].append(h)
    out = {}
    for model, hs in groups.items():
        per = {}
        prev: list[bool] | None = None
        for level in MAG_BINS:
            now = [bool(h["levels"][level]["hit"]) for h in hs]
            cond = None
            if prev is not None and any(prev):
                cond = sum(a and b for a, b in zip(prev, now, strict=True)) / sum(prev)
            rnd = [h["random"][level] for h in hs if h.get("random")]
            per[level] = {
                "unconditional": sum(now) / len(now),
                "conditional": cond if prev is not None else sum(now) / len(now),
                "random": sum(rnd) / len(rnd) if rnd else None,
                "slides": len(now),
            }
            prev = now
        out[model] = per
    return out
