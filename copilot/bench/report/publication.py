"""One list of tables for every report format: the paper's tables, the process tables, the process measures
per configuration (failures, S, CWAS-3, R6, the seven dimensions, Pass@3, tokens, cost, time), the single-fault
perturbations, model-against-model paired deltas and provenance. Markdown, CSV and JSON render that list, so
they carry the same tables and measures (report.html shows them too)."""

from __future__ import annotations

from typing import Any

from copilot.bench.measures import dimensions as D
from copilot.bench.report.measures_report import FAILURE_CODES, measures_json
from copilot.bench.tables.analysis import process_tables
from copilot.bench.tables.comparisons import model_pairs_table
from copilot.bench.tables.paper import paper_tables
from copilot.bench.tables.provenance import provenance_table
from copilot.bench.tables.render import Cell, Table, _flat_header, glossary_markdown, row_label, to_csv, to_markdown


def measures_table(models: dict[str, Any]) -> Table:
    """Per configuration (measures JSON `models`): the process measures and the usage totals."""
    cols = ["Episodes", *FAILURE_CODES, "S", "Formal passes ≥0.70/0.75/0.80", "CWAS-3", "R6", *D.DIMENSIONS,
            "Pass@3", "Tokens in", "Tokens out", "Cost $", "Wall s"]  # fmt: skip
    t = Table(
        "measures",
        "Process measures per run configuration",
        "F1–F5: episodes labelled with each failure; S: mean checkpoint completion (ACP-Bench); formal passes at "
        "S ≥ 0.70, 0.75, 0.80; CWAS-3 and R6 (ACP-Bench); F…B: MedHarnessBench's seven dimensions, each the "
        "mean over the episodes where it is defined (n); Pass@3: the unbiased estimator (— with fewer than 3 "
        "runs of a case); tokens, cost (— where a model has no price) and wall time summed over episodes.",
        [[("Configuration", 1), *((c, 1) for c in cols)]],
    )
    for name, m in models.items():
        u = m["usage"]
        dims = [Cell(m["dimensions"].get(d, {}).get("mean"), n=m["dimensions"].get(d, {}).get("n"))
                for d in D.DIMENSIONS]  # fmt: skip
        t.rows.append([
            Cell(name, "label"), Cell(str(m["episodes"]), "label"),
            *(Cell(str(m["failures"][c]), "label") for c in FAILURE_CODES),
            Cell(m["checkpoint_S"]), Cell("/".join(str(v) for v in m["formal_passes"].values()), "label"),
            Cell(m["cwas3"]), Cell(m["r6"]), *dims, Cell(m["pass@3"]),
            Cell(str(u["prompt_tokens"]), "label"), Cell(str(u["completion_tokens"]), "label"),
            Cell(u["cost_usd"]), Cell(u["wall_s"]),
        ])  # fmt: skip
    return t


def perturbation_table(stats: dict[str, Any] | None) -> Table:
    """`bench perturb`'s statistics per fault, with fault localisation in the caption."""
    loc = (stats or {}).get("localisation") or {}
    caption = "One injected fault per episode (seed 001, Section 5.3): pairs, detection rate (the target " \
              "dimension dropped), mean target drop and selectivity margin with 95% bootstrap CIs."
    if loc:
        caption += (f" Localisation by the largest drop over {loc.get('pairs')} pairs: balanced accuracy "
                    f"{_num(loc.get('balanced_accuracy'))}, macro-F1 {_num(loc.get('macro_f1'))}, permutation p "
                    f"{_num(loc.get('permutation_p'))}.")  # fmt: skip
        if loc.get("recall"):
            caption += " Per-dimension recall: " + ", ".join(f"{d} {_num(v)}" for d, v in loc["recall"].items())
            caption += "; confusion (target → predicted): " + "; ".join(
                f"{t} → " + ", ".join(f"{p} {n}" for p, n in row.items() if n) for t, row in loc["confusion"].items()
            ) + "."  # fmt: skip
    caption += " Detection, drop and margin are balanced: the mean over (configuration, module) strata."
    t = Table("perturbations", "Single-fault perturbations", caption,
              [[("Fault", 1), ("Target", 1), ("Pairs", 1), ("Detected", 1), ("Target drop", 1),
                ("Selectivity margin", 1)]])  # fmt: skip
    t.label_cols = 2
    for name, f in ((stats or {}).get("faults") or {}).items():
        if not f["pairs"]:
            continue
        t.rows.append([Cell(name, "label"), Cell(f["target"], "label"), Cell(str(f["pairs"]), "label"),
                       Cell(f["detection_rate"]), Cell(f["target_drop"], ci=_ci(f["target_drop_ci"])),
                       Cell(f["selectivity_margin"], ci=_ci(f["selectivity_margin_ci"]))])  # fmt: skip
    return t


def funnel_table(funnels: dict[str, Any] | None) -> Table:
    """Algorithm 1 per harness configuration that also ran under `paper`: the funnel's counts and the paired
    test of ΔY (Strict) and ΔS (each dimension): mean difference, paired bootstrap CI, sign-flip p."""
    t = Table("funnel", "Native (paper) against harness: intervention funnel and paired test (Algorithm 1)",
              "Counts reaching z0–z5; Pr[Π ≠ ∅]: the share of pairs with an intervention reaching z5; per measure "
              "the mean paired difference harness − paper over (case, repeat, seed) pairs, its paired bootstrap "
              "95% CI and its two-sided sign-flip permutation p.",
              [[("Configuration", 1), ("Measure", 1), ("Pairs", 1), ("Counts z0–z5", 1), ("Pr[Π ≠ ∅]", 1),
                ("Δ", 1), ("Sign-flip p", 1)]])  # fmt: skip
    t.label_cols = 2
    for name, f in (funnels or {}).items():
        counts = "/".join(str(c) for c in f["counts"])
        t.rows.append([Cell(name, "label"), Cell("ΔY Strict", "label"), Cell(str(f["pairs"]), "label"),
                       Cell(counts, "label"), Cell(f["p_behaviour"]),
                       Cell(f["delta_strict"], ci=_ci(f["delta_strict_ci"]), n=f["pairs"]),
                       Cell(f.get("delta_strict_p"))])  # fmt: skip
        for d, v in (f.get("delta_dimensions") or {}).items():
            n = (f.get("delta_dimensions_pairs") or {}).get(d)
            t.rows.append([Cell(name, "label"), Cell(f"ΔS {d}", "label"), Cell(str(n or ""), "label"),
                           Cell("", "label"), Cell(None),
                           Cell(v, ci=_ci((f.get("delta_dimensions_ci") or {}).get(d)), n=n),
                           Cell((f.get("delta_dimensions_p") or {}).get(d))])  # fmt: skip
    return t


def _ci(ci: Any) -> tuple[float, float] | None:
    return None if ci is None else (float(ci[0]), float(ci[1]))


def _num(v: Any) -> str:
    return "—" if v is None else f"{v:.2f}"


def publication_tables(rows: list[dict[str, Any]], measures: dict[str, Any]) -> list[Table]:
    """Every table of a run's report, in report order (`measures`: the run's `measures_json`)."""
    return [*paper_tables(rows), *process_tables(rows), measures_table(measures["models"]),
            perturbation_table(measures.get("perturbations")), funnel_table(measures.get("native_vs_harness")),
            model_pairs_table(rows),
            provenance_table(rows)]  # fmt: skip


def table_json(t: Table) -> dict[str, Any]:
    """A table as JSON: key, title, caption, column names, and per row its group, label and cells (value, change,
    n, runs, CI, the change's CI, errors, bold, mark) by column name."""
    cols = _flat_header(t)
    group_at = dict(t.groups)
    out_rows, group = [], ""
    last: list[str] = []
    for i, row in enumerate(t.rows):
        group = group_at.get(i, group)
        label, last = row_label(row, t.label_cols, last)
        cells = {}
        for col, c in zip(cols[t.label_cols :], row[t.label_cols :], strict=False):
            cells[col] = {"value": c.value, "text": c.text(), "delta": c.delta, "n": c.n or None,
                          "runs": c.runs or None, "ci": list(c.ci) if c.ci else None,
                          "delta_ci": list(c.delta_ci) if c.delta_ci else None, "errors": c.errors or None,
                          "bold": c.bold, "mark": c.mark or None}  # fmt: skip
        out_rows.append({"group": group, "label": label, "cells": cells})
    return {"key": t.key, "title": t.title, "caption": t.caption, "columns": cols, "rows": out_rows}


def render(rows: list[dict[str, Any]], fmt: str, perturbed: list[dict[str, Any]] | None = None) -> str:
    """The report as Markdown (`md`), CSV (`csv`) or JSON (`json`: the measures plus `tables`), one table list."""
    import json

    measures = measures_json(rows, perturbed)
    tables = publication_tables(rows, measures)
    if fmt == "csv":
        return to_csv(tables)
    if fmt == "md":
        return "\n".join(to_markdown(t) for t in tables) + glossary_markdown()
    if fmt == "json":
        return json.dumps({**measures, "tables": [table_json(t) for t in tables]}, indent=1, ensure_ascii=False,
                          default=str)  # fmt: skip
    raise ValueError(f"unknown report format {fmt!r}; one of md, csv, json")
