"""The paper's score tables by track: Table 1 (viewer-native radiology), Table 2 (pathology), Table 3 (Track B,
advanced operations) and Table 4 (the run's modules), and `paper_tables`, every paper table of a report in order
(Tables 5–7, Pass@k and protocols side by side are in `paper_studies`).

Model Avg. follows Table 1: Task and Strict average the Longitudinal, Brain and Lung columns, Loc. averages
Brain and Lung; it is left empty when one of those columns is missing. Track B deltas compare with the same
model's Track A configuration, or, for Registration on Longitudinal MRI, with the unregistered control
(Track B, operation set `none`). Cells, groups and statistics: `aggregate`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from copilot.bench.scoring.module_facts import all_facts, facts_of, in_table
from copilot.bench.scoring.module_facts import title as module_title
from copilot.bench.tables.aggregate import (
    Cfg,
    Stat,
    add_group_rows,
    config_label,
    configurations,
    group_header,
    has_any,
    has_loc,
    is_floor,
    matched,
    mean_cell,
    metrics,
    module_stats,
    protocol_note,
    score_cell,
    track_configs,
)
from copilot.bench.tables.paper_studies import passk_table, protocol_table, table5, table6, table7
from copilot.bench.tables.render import Cell, Table


def _avg(values: list[float | None]) -> float | None:
    """The mean of values, None when one is missing (the paper's Model Avg.)."""
    return None if any(v is None for v in values) or not values else sum(values) / len(values)  # type: ignore[arg-type]


def _get(stats: dict[str, Any] | None, key: str) -> float | None:
    """A score's value from `module_stats` (None without stats)."""
    if stats is None:
        return None
    v = stats.get(key)
    return v.value if isinstance(v, Stat) else v


# ----- Table 1 -----

# The modules of each table and their columns come from their declarations (`copilot.bench.scoring.module_facts`).


def table1(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    radiology = in_table(1)
    configs = [c for c in track_configs(groups, "A") if has_any(groups[c], radiology)]
    header = group_header("Model", radiology, [("Model Avg.", 3)])
    t = Table(
        "table1",
        "Table 1: Main viewer-native radiology results (Track A)",
        "Strict: answer plus evidence (yellow); Loc.: localization (blue). Model Avg.: Task and Strict average "
        "the three task families, Loc. averages Brain MRI and Lung PET/CT. Each cell: mean, n and 95% CI; "
        "best of a group in bold; floors and budget-study runs are shown apart and never in a mean."
        + protocol_note(configs),
        header,
    )

    def cells(cfg: Cfg) -> list[Cell]:
        stats = {m: module_stats(groups[cfg], m) for m in radiology}
        task = _avg([_get(s, "task") for s in stats.values()])
        strict = _avg([_get(s, "strict") for s in stats.values()])
        loc = _avg([_get(s, "loc") for m, s in stats.items() if has_loc(m)])
        out = [score_cell(stats[m], k, "" if k == "task" else k) for m in radiology for k in metrics(m)]
        avg = [mean_cell([score_cell(stats[m], k, kind) for m in radiology if k != "loc" or has_loc(m)], kind)
               for k, kind in (("task", ""), ("strict", "strict"), ("loc", "loc"))]  # fmt: skip
        for a, v in zip(avg, (task, strict, loc), strict=True):
            a.value = v  # the paper's Model Avg. (None when a column is missing)
            a.ci = a.ci if v is not None else None
        return [*out, *avg]

    add_group_rows(t, groups, configs, cells)
    return t


# ----- Table 2 -----


def table2(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    pathology = in_table(2)
    configs = [c for c in track_configs(groups, "A") if has_any(groups[c], pathology)]
    header = group_header("Model", pathology)
    t = Table(
        "table2",
        "Table 2: Viewer-native pathology (Track A)",
        "Coordinate-grounded WSI scoring; Strict: answer plus evidence; Loc.: coordinate localization on "
        "ground-truth positive slides." + protocol_note(configs),
        header,
    )

    def cells(cfg: Cfg) -> list[Cell]:
        out = []
        for m in pathology:
            s = module_stats(groups[cfg], m)
            out += [score_cell(s, k, "" if k == "task" else k) for k in metrics(m)]
        return out

    add_group_rows(t, groups, configs, cells)
    return t


# ----- Table 3 -----


def ops_columns(ops: str) -> tuple[str, ...]:
    """The modules an operation set is reported on (each module declares its sets), in table order."""
    return tuple(f.name for f in all_facts() if ops in f.operations)


def table3(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    b_configs = [c for c in track_configs(groups, "B") if c.ops != "none"]
    from copilot.tools.operation_sets import ops_title, table_operation_sets

    present_ops = [o for o in table_operation_sets() if any(c.ops == o for c in b_configs)]
    columns = []
    for ops in present_ops:
        mods = [m for m in ops_columns(ops) if any(c.ops == ops and has_any(groups[c], (m,)) for c in b_configs)]
        columns += [(ops, m) for m in mods]
    head1: list[tuple[str, int]] = [("Backbone", 1), ("Metric", 1)]
    for ops in present_ops:
        n = sum(1 for o, _ in columns if o == ops)
        if n:
            head1.append((ops_title(ops), n))
    header = [head1, [("", 1), ("", 1)] + [(module_title(m), 1) for _, m in columns]]
    t = Table(
        "table3",
        "Table 3: Track B, advanced operations",
        "Score with the operation set enabled and its change against the same model's Track A run; "
        "Registration on Longitudinal MRI against the unregistered control (operation set `none`) when "
        "present. Green: improvement, red: degradation, grey: no change; Δ [..]: 95% CI of the change."
        + protocol_note(b_configs),
        header,
    )
    t.label_cols = 2
    models = sorted({c._replace(ops="") for c in b_configs}, key=lambda c: (is_floor(c.policy), c))
    for key in models:  # the backbones, then the offline floors apart (never among them)
        if is_floor(key.policy) and not any(title.startswith("Reference") for _, title in t.groups):
            t.groups.append((len(t.rows), "Reference policies (floors)"))
        block = []
        for metric, kind in (("task", ""), ("strict", "strict"), ("loc", "loc")):
            cells = [Cell(metric.capitalize() if metric != "loc" else "Loc.", "label")]
            for ops, m in columns:
                cfg = next((c for c in b_configs if c._replace(ops="") == key and c.ops == ops), None)
                if cfg is None or (metric == "loc" and not has_loc(m)):
                    cells.append(Cell(None, kind))
                    continue
                s = module_stats(groups[cfg], m)
                ref_cfg = None
                if ops == "registration" and (f := facts_of(m)) is not None and f.registration_control:
                    ref_cfg = matched(groups, cfg, "B", "none")
                ref_cfg = ref_cfg or matched(groups, cfg, "A")
                ref = module_stats(groups[ref_cfg], m) if ref_cfg else None
                cells.append(score_cell(s, metric, kind, ref))
            block.append(cells)
        label = config_label(key, list(b_configs))
        for n, cells in enumerate(block):
            t.rows.append([Cell(label if n == 0 else "", "label"), *cells])
    return t


# ----- Table 4 -----


def table4(rows: list[dict[str, Any]]) -> Table:
    """The run's case set per module: cases, episodes, and the frequency of each ground-truth label."""
    header = [[("Module", 1), ("Viewer", 1), ("Cases (run)", 1), ("Cases (paper)", 1), ("Episodes", 1),
               ("Label frequencies (truth)", 1)]]  # fmt: skip
    t = Table(
        "table4",
        "Table 4: Benchmark modules of this run",
        "Cases: distinct case ids in the results; label frequencies from the hidden truth recorded with each "
        "scored case (brain/longitudinal: the label; lung: tumour location, Q1; lymph node: largest "
        "metastasis). The paper's counts are its benchmark-eligible units.",
        header,
    )
    t.label_cols = 6
    known = [f.name for f in all_facts()]
    present = {r["module"] for r in rows}
    for module in [m for m in known if m in present] + sorted(present - set(known)):
        facts = facts_of(module)
        mine = [r for r in rows if r["module"] == module]
        truth: dict[str, str] = {}
        for r in mine:
            f = (r.get("details") or {}).get("fields", {}).get(facts.label_field if facts else "label")
            if f is not None and f.get("truth") is not None:
                truth[r["case_id"]] = str(f["truth"])
        counts: dict[str, int] = defaultdict(int)
        for v in truth.values():
            counts[v] += 1
        freq = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "—"
        t.rows.append([
            Cell(module_title(module), "label"),
            Cell(facts.viewer if facts else "—", "label"),
            Cell(str(len({r["case_id"] for r in mine})), "label"),
            Cell(str(facts.paper_cases if facts and facts.paper_cases is not None else "—"), "label"),
            Cell(str(len(mine)), "label"),
            Cell(freq, "label"),
        ])  # fmt: skip
    return t


def paper_tables(rows: list[dict[str, Any]]) -> list[Table]:
    """The paper's tables in report order: Tables 1–7, Pass@k over repeats, protocols side by side."""
    return [table1(rows), table2(rows), table3(rows), table4(rows), table5(rows), table6(rows), table7(rows),
            passk_table(rows), protocol_table(rows)]  # fmt: skip
