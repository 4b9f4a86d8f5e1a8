"""Seed 003's nested exploration hits with the agent's whole-slide view as its level's selection, and the
report's one exploration table (coverage) reading those nested hits."""

from __future__ import annotations

from typing import Any

from copilot.bench.measures.exploration import level_fields, level_hits, retain
from copilot.bench.tables.analysis import coverage_table

ROI = (500.0, 350.0, 600.0, 450.0)


def _hit(r: tuple[float, float, float, float]) -> bool:
    return r[0] < ROI[2] and ROI[0] < r[2] and r[1] < ROI[3] and ROI[1] < r[3]


def test_whole_slide_first_episode_hits_at_every_level() -> None:
    """Slide 1024 × 768 px at 0.5 µm (20× base). The agent views the whole slide at downsample 2 (10×: bin 10×),
    then zooms to downsample 1 (20×: bin 40×) on a 512 × 384 field centred (528, 396) over the ROI
    (500..600, 350..450). The whole-slide view is the 10× selection and the 2.5× one above it: retained
    2.5× [slide], 10× [slide], 40× [field] (centre inside the slide) → hits at 2.5×, 10× and 40×: (1, 1, 1).
    Before, 2.5× was skipped, so nothing was retained below it: (0, 0, 0)."""
    agent = [{"region": [0, 0, 1024, 768], "magnification": 10.0},
             {"region": [272, 204, 784, 588], "magnification": 20.0}]  # fmt: skip
    fields = level_fields(agent, (1024.0, 768.0))
    assert [lv for lv, _ in fields] == ["2.5×", "10×", "40×"]
    hits = level_hits(retain(fields), _hit)
    assert [(h["retained"], h["hit"]) for h in hits.values()] == [(1, True), (1, True), (1, True)]
    partial = level_fields([{"region": [0, 0, 1000, 768], "magnification": 10.0}], (1024.0, 768.0))
    assert [lv for lv, _ in partial] == ["10×"]  # not the whole slide: its own level only


def _row(levels: list[bool], rnd: float, model: str = "m") -> dict[str, Any]:
    hits = {lv: {"hit": h} for lv, h in zip(("2.5×", "10×", "40×"), levels, strict=True)}
    return {"case_id": f"s{len(levels)}{rnd}", "module": "breast_wsi", "model": model, "policy": model, "track": "A",
            "budget": 20, "task": 0.0, "strict": 0.0, "loc": None,
            "process": {"hierarchical_hits": {"levels": hits,
                                              "random": {"2.5×": 1.0, "10×": rnd, "40×": 0.0}}}}  # fmt: skip


def test_coverage_table_is_the_nested_table() -> None:
    """Two slides: hits (T, T, F) and (T, F, F). Nested unconditional 2.5× 1, 10× 0.5, 40× 0; conditional 10×
    1/2, 40× 0/1 = 0; random 10× (0.5 + 0.3)/2 = 0.4 — the same numbers as the measures' JSON, one table."""
    (row,) = coverage_table([_row([True, True, False], 0.5), _row([True, False, False], 0.3)]).rows
    values = [c.value for c in row[4:13]]
    assert values[:3] == [1.0, None, 1.0]
    assert values[3:5] == [0.5, 0.5] and abs(values[5] - 0.4) < 1e-9
    assert values[6:9] == [0.0, 0.0, 0.0] and row[13].text() == "2"
