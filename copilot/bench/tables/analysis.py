"""Process tables beyond the paper's score tables: workflow-guard firings, exploration coverage (pathology hit
rates per magnification as PathAgentBench reports them) and the stability of repeated runs (answer and Strict
agreement, first differing call), all from result rows alone."""

from __future__ import annotations

from collections import Counter, defaultdict
from statistics import median
from typing import Any

from copilot.bench.measures.configs import config_of, label
from copilot.bench.measures.coverage import MAG_BINS
from copilot.bench.measures.exploration import K, hit_rates
from copilot.bench.scoring.stats import mean
from copilot.bench.tables.aggregate import cfg_of, config_label, configurations
from copilot.bench.tables.render import Cell, Table

GUARD_CODES = ("unregistered_fusion", "off_source_series", "superseded_node", "unobserved_evidence")


def guard_table(rows: list[dict[str, Any]]) -> Table:
    """Run-time workflow guard firings per run configuration (summed over its episodes; the paper protocol has
    no guards, so its rows are zero by construction)."""
    per_model: dict[str, Counter[str]] = defaultdict(Counter)
    episodes: Counter[str] = Counter()
    for r in rows:
        episodes[_who(r)] += 1
        per_model[_who(r)].update((r.get("process") or {}).get("workflow_guards", {}))
    codes = list(GUARD_CODES) + sorted({c for m in per_model.values() for c in m} - set(GUARD_CODES))
    header = [[("Configuration", 1), ("Episodes", 1)] + [(c, 1) for c in codes] + [("Episodes with a warning", 1)]]
    t = Table(
        "guards",
        "Workflow guard firings per run configuration",
        "Warnings the handlers returned to the model (unregistered fusion, evidence off the source series, "
        "superseded node ids, evidence on a slice or point never shown; slides: evidence below the magnification "
        "localisation needs, or recorded while the view had moved since the last screenshot).",
        header,
    )
    for model in sorted(episodes):
        warned = sum(1 for r in rows if _who(r) == model and (r.get("process") or {}).get("workflow_guards"))
        t.rows.append(
            [
                Cell(model, "label"),
                Cell(str(episodes[model]), "label"),
                *[Cell(str(per_model[model].get(c, 0)), "label") for c in codes],
                Cell(str(warned), "label"),
            ]
        )
    return t


def _who(row: dict[str, Any]) -> str:
    """A row's run configuration (`configs.label`): guard counts are never pooled across configurations."""
    return label(config_of(row))


def coverage_table(rows: list[dict[str, Any]]) -> Table:
    """Radiology: lesion ever shown and the call that first showed it; pathology: seed 003's nested hit rates
    (hierarchical top-K retention, the report's one exploration measure) against the random baseline."""
    groups = configurations(rows)
    configs = sorted(groups)
    header = [
        [("Configuration", 1), ("Radiology", 3)]
        + [(f"Pathology {b} (K={K[b]})", 3) for b in MAG_BINS] + [("Slides", 1)],
        [("", 1), ("Episodes", 1), ("Lesion shown", 1), ("First shown (call)", 1)]
        + [(h, 1) for _ in MAG_BINS for h in ("Hit", "Conditional", "Random")] + [("", 1)],
    ]  # fmt: skip
    t = Table(
        "coverage",
        "Exploration coverage",
        "Radiology: share of episodes whose shown planes cut the lesion, median call that first showed it. "
        "Pathology (positive slides; seed 003, Task 3 Mode B): hierarchical top-K retention, K = 6, 3, 2 at "
        "2.5×, 10×, 40×, the agent's fields in visiting order, each inside a retained field of the level above "
        "(a whole-slide view is its level's selection and every level's above it); hit = a retained field "
        "overlaps a target ROI; conditional = among slides that hit at the level above; random = uniform top-K "
        "sampling of the same slide's tiling.",
        header,
    )
    for cfg in configs:
        covs = [(r.get("process") or {}).get("coverage") or {} for r in groups[cfg]]
        rad = [c for c in covs if c.get("lesion_seen") is not None]  # planes through volumes with a lesion
        nested = next(iter(hit_rates(groups[cfg]).values()), None)
        if not rad and not nested:
            continue
        firsts = [c["first_seen_call"] for c in rad if c.get("first_seen_call") is not None]
        cells = [
            Cell(str(len(rad)), "label"),
            Cell(mean([float(c["lesion_seen"]) for c in rad])),
            Cell(f"{median(firsts):g}" if firsts else None, "label"),
        ]
        for b in MAG_BINS:
            v = (nested or {}).get(b) or {}
            cond = None if b == MAG_BINS[0] else v.get("conditional")
            cells += [Cell(v.get("unconditional")), Cell(cond), Cell(v.get("random"))]
        slides = ((nested or {}).get(MAG_BINS[0]) or {}).get("slides")
        cells.append(Cell(str(slides) if slides else None, "label"))
        t.rows.append([Cell(config_label(cfg, configs), "label"), *cells])
    return t


def _answer_key(row: dict[str, Any]) -> str:
    fields = (row.get("details") or {}).get("fields", {})
    return "|".join(f"{k}={v.get('given')}" for k, v in sorted(fields.items()))


def first_divergence(signatures: list[list[str]]) -> int | None:
    """1-based index of the first call at which the repeats' call sequences differ (None: identical)."""
    if len(signatures) < 2:
        return None
    longest = max(len(s) for s in signatures)
    for i in range(longest):
        if len({s[i] if i < len(s) else None for s in signatures}) > 1:
            return i + 1
    return None


def stability(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (configuration, case) with two or more repeats: answer and Strict agreement, trace divergence."""
    by_case: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_case[(*cfg_of(r), r["case_id"])].append(r)
    out = []
    for key, g in sorted(by_case.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if len(g) < 2:
            continue
        g = sorted(g, key=lambda r: r["repeat"])
        answers = Counter(_answer_key(r) for r in g)
        stricts = Counter(r["strict"] for r in g)
        sigs = [list((r.get("process") or {}).get("signature", [])) for r in g]
        out.append(
            {
                "config": key[:-1],
                "case_id": key[-1],
                "module": g[0]["module"],
                "repeats": len(g),
                "answer_agreement": answers.most_common(1)[0][1] / len(g),
                "strict_agreement": stricts.most_common(1)[0][1] / len(g),
                "strict_values": [r["strict"] for r in g],
                "distinct_traces": len({tuple(s) for s in sigs}),
                "first_divergence": first_divergence(sigs),
            }
        )
    return out


def stability_table(rows: list[dict[str, Any]]) -> Table:
    header = [
        [
            ("Configuration", 1),
            ("Case", 1),
            ("Repeats", 1),
            ("Answer agreement", 1),
            ("Strict agreement", 1),
            ("Strict per repeat", 1),
            ("Distinct traces", 1),
            ("First differing call", 1),
        ]
    ]
    t = Table(
        "stability",
        "Stability of repeated runs (`bench run --repeats N`)",
        "Agreement: share of repeats giving the most common answer (or Strict value); first differing "
        "call: the first agent call at which the repeats' call sequences part.",
        header,
    )
    t.label_cols = 2
    configs = sorted(configurations(rows))
    for s in stability(rows):
        t.rows.append(
            [
                Cell(config_label(s["config"], configs), "label"),
                Cell(s["case_id"], "label"),
                Cell(str(s["repeats"]), "label"),
                Cell(s["answer_agreement"]),
                Cell(s["strict_agreement"]),
                Cell(" ".join(f"{v:.2f}" for v in s["strict_values"]), "label"),
                Cell(str(s["distinct_traces"]), "label"),
                Cell("—" if s["first_divergence"] is None else str(s["first_divergence"]), "label"),
            ]
        )
    return t


def process_tables(rows: list[dict[str, Any]]) -> list[Table]:
    """The process tables besides the paper's; the seven dimensions are in the process-measures section
    (`measures_report`), by their equations, and nowhere else."""
    return [guard_table(rows), coverage_table(rows), stability_table(rows)]
