"""The paper's tables (1, 2, 3, 5, 6, 7), computed from result rows alone, in one neutral form rendered as
HTML, Markdown or CSV.

A configuration is (model, policy, track, ops, budget, backend, seed); its score on a module is the mean
over its episodes (repeats included). Scores are fractions, as in the paper. Model Avg. follows Table 1:
Task and Strict average the Longitudinal, Brain and Lung columns, Loc. averages Brain and Lung; it is
left empty when one of those columns is missing. Deltas compare with the same model's Track A
configuration (same budget and backend when present), or, for Registration on Longitudinal MRI, with the
unregistered control (Track B, operation set `none`) when the database holds one.
"""

from __future__ import annotations

import csv
import html
import io
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from copilot.bench.parsers import RANO_FIELDS

CONFIG = ("model", "policy", "track", "ops", "budget", "backend", "seed")
TITLES = {
    "longitudinal_mri": "Longitudinal MRI",
    "brain_mri": "Brain MRI",
    "lung_petct": "Lung PET/CT",
    "breast_wsi": "Breast WSI",
    "lymph_node_wsi": "Lymph-node WSI",
}
FIELD_TITLES = dict(zip(RANO_FIELDS, ("NML", "T2 Prog.", "Cur. TL", "New TL", "Cur. NTL", "New NTL"), strict=True))
LUNG_TITLES = {"1": "Tumor Loc.", "2": "T Stage", "3": "Path. N", "4": "Hist.", "5": "Grade"}
OFFLINE = ("prior", "baseline", "scripted:", "answers")
EPS = 0.005  # a change below half the last printed digit is "no change"


@dataclass
class Cell:
    value: float | str | None
    kind: str = ""  # "" | strict | loc | field | label
    delta: float | None = None

    def text(self) -> str:
        if isinstance(self.value, str):
            return self.value
        base = "—" if self.value is None else f"{self.value:.2f}"
        if self.delta is None or self.value is None:
            return base
        return f"{base} ({arrow(self.delta)} {abs(self.delta):.2f})"


@dataclass
class Table:
    key: str
    title: str
    caption: str
    header: list[list[tuple[str, int]]]
    rows: list[list[Cell]] = field(default_factory=list)
    groups: list[tuple[int, str]] = field(default_factory=list)  # (row index, group title) before that row
    label_cols: int = 1  # leading columns that name the row


def arrow(delta: float) -> str:
    return "↔" if abs(delta) < EPS else "↑" if delta > 0 else "↓"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


# ----- aggregation -----


def configurations(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[tuple(r[k] for k in CONFIG)].append(r)
    return dict(groups)


def module_stats(rows: list[dict[str, Any]], module: str) -> dict[str, Any] | None:
    """Task, Strict, Loc and per-field accuracies of one module over some rows (None without rows)."""
    mine = [r for r in rows if r["module"] == module]
    if not mine:
        return None
    out: dict[str, Any] = {
        "n": len(mine),
        "task": _mean([r["task"] for r in mine]),
        "strict": _mean([r["strict"] for r in mine]),
        "loc": _mean([r["loc"] for r in mine if r["loc"] is not None]),
    }
    fields: dict[str, list[float]] = defaultdict(list)
    for r in mine:
        for name, f in (r.get("details") or {}).get("fields", {}).items():
            if f.get("correct") is not None:
                fields[name].append(float(f["correct"]))
    out["fields"] = {k: _mean(v) for k, v in fields.items()}
    return out


def _is_offline(policy: str) -> bool:
    return any(policy == p or policy.startswith(p) for p in OFFLINE)


def _label(cfg: tuple[Any, ...], configs: list[tuple[Any, ...]], with_budget: bool = True) -> str:
    """The model name, with budget/backend/ops/seed/policy only where the table holds several values."""
    model, policy, _track, _ops, budget, backend, seed = cfg
    same = [c for c in configs if c[0] == model]
    parts = [model]
    if len({c[1] for c in same}) > 1:
        parts.append(policy)
    if with_budget and len({c[4] for c in same}) > 1:
        parts.append(f"budget {budget}")
    if len({c[5] for c in same}) > 1:
        parts.append(backend)
    if len({c[6] for c in same}) > 1:
        parts.append(f"seed {seed}")
    return parts[0] + (f" ({', '.join(parts[1:])})" if parts[1:] else "")


def _track_configs(groups: dict[tuple[Any, ...], list[dict[str, Any]]], track: str, ops: str | None = None):
    return sorted(c for c in groups if c[2] == track and (ops is None or c[3] == ops))


def _grouped(configs: list[tuple[Any, ...]]) -> list[tuple[str, list[tuple[Any, ...]]]]:
    models = [c for c in configs if not _is_offline(c[1])]
    offline = [c for c in configs if _is_offline(c[1])]
    return [(t, g) for t, g in (("Models", models), ("Offline policies", offline)) if g]


def _add_group_rows(table: Table, groups: dict, configs: list, cells_for, label_configs: list | None = None) -> None:
    """Rows per configuration under group titles, with a mean-over-reported row per group of two or more."""
    for title, members in _grouped(configs):
        table.groups.append((len(table.rows), title))
        block = []
        for cfg in members:
            cells = cells_for(cfg)
            block.append(cells)
            table.rows.append([Cell(_label(cfg, label_configs or configs), "label"), *cells])
        if len(block) > 1:
            means = []
            for col in range(len(block[0])):
                vals = [b[col].value for b in block if isinstance(b[col].value, float)]
                means.append(Cell(_mean(vals), block[0][col].kind))
            table.rows.append([Cell("Mean over reported", "label"), *means])


def _avg(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) or not values else sum(values) / len(values)  # type: ignore[arg-type]


def _get(stats: dict[str, Any] | None, key: str) -> float | None:
    return None if stats is None else stats.get(key)


# ----- Table 1 -----


def table1(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    configs = _track_configs(groups, "A")
    header = [
        [("Model", 1), ("Longitudinal MRI", 2), ("Brain MRI", 3), ("Lung PET/CT", 3), ("Model Avg.", 3)],
        [("", 1)]
        + [
            (h, 1)
            for h in ("Task", "Strict", "Task", "Strict", "Loc.", "Task", "Strict", "Loc.", "Task", "Strict", "Loc.")
        ],
    ]
    t = Table(
        "table1",
        "Table 1: Main viewer-native radiology results (Track A)",
        "Strict: answer plus evidence (yellow); Loc.: localization (blue). Model Avg.: Task and Strict average "
        "the three task families, Loc. averages Brain MRI and Lung PET/CT.",
        header,
    )

    def cells(cfg: tuple[Any, ...]) -> list[Cell]:
        lo, br, lu = (module_stats(groups[cfg], m) for m in ("longitudinal_mri", "brain_mri", "lung_petct"))
        task = _avg([_get(s, "task") for s in (lo, br, lu)])
        strict = _avg([_get(s, "strict") for s in (lo, br, lu)])
        loc = _avg([_get(br, "loc"), _get(lu, "loc")])
        return [
            Cell(_get(lo, "task")),
            Cell(_get(lo, "strict"), "strict"),
            Cell(_get(br, "task")),
            Cell(_get(br, "strict"), "strict"),
            Cell(_get(br, "loc"), "loc"),
            Cell(_get(lu, "task")),
            Cell(_get(lu, "strict"), "strict"),
            Cell(_get(lu, "loc"), "loc"),
            Cell(task),
            Cell(strict, "strict"),
            Cell(loc, "loc"),
        ]

    _add_group_rows(t, groups, [c for c in configs if _has_any(groups[c], RADIOLOGY)], cells)
    return t


RADIOLOGY = ("longitudinal_mri", "brain_mri", "lung_petct")
PATHOLOGY = ("breast_wsi", "lymph_node_wsi")


def _has_any(rows: list[dict[str, Any]], modules: tuple[str, ...]) -> bool:
    return any(r["module"] in modules for r in rows)


# ----- Table 2 -----


def table2(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    configs = [c for c in _track_configs(groups, "A") if _has_any(groups[c], PATHOLOGY)]
    header = [
        [("Model", 1), ("Breast WSI", 3), ("Lymph-node WSI", 3)],
        [("", 1)] + [(h, 1) for h in ("Task", "Strict", "Loc.") * 2],
    ]
    t = Table(
        "table2",
        "Table 2: Viewer-native pathology (Track A)",
        "Coordinate-grounded WSI scoring; Strict: answer plus evidence; Loc.: coordinate localization on "
        "ground-truth positive slides.",
        header,
    )

    def cells(cfg: tuple[Any, ...]) -> list[Cell]:
        out = []
        for m in PATHOLOGY:
            s = module_stats(groups[cfg], m)
            out += [Cell(_get(s, "task")), Cell(_get(s, "strict"), "strict"), Cell(_get(s, "loc"), "loc")]
        return out

    _add_group_rows(t, groups, configs, cells)
    return t


# ----- Table 3 -----

OPS_COLUMNS = {  # operation set → modules it is reported on (Table 3)
    "segmentation": ("longitudinal_mri", "brain_mri", "lung_petct"),
    "registration": ("longitudinal_mri", "lung_petct"),
    "vista3d": ("lung_petct",),
    "all": ("longitudinal_mri", "brain_mri", "lung_petct", "breast_wsi", "lymph_node_wsi"),
}


def _matched(groups: dict, cfg: tuple[Any, ...], track: str, ops: str = "") -> tuple[Any, ...] | None:
    """The same model's configuration on another track: same budget and backend when present."""
    cands = [c for c in groups if c[0] == cfg[0] and c[2] == track and c[3] == ops]
    if not cands:
        return None
    return sorted(cands, key=lambda c: (c[4] != cfg[4], c[5] != cfg[5], c[6] != cfg[6], c[1] != cfg[1], c))[0]


def _delta(value: float | None, ref: float | None) -> float | None:
    return None if value is None or ref is None else value - ref


def table3(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    b_configs = [c for c in _track_configs(groups, "B") if c[3] != "none"]
    present_ops = [o for o in OPS_COLUMNS if any(c[3] == o for c in b_configs)]
    columns = []
    for ops in present_ops:
        mods = [m for m in OPS_COLUMNS[ops] if any(c[3] == ops and _has_any(groups[c], (m,)) for c in b_configs)]
        columns += [(ops, m) for m in mods]
    from copilot.tools.operation_sets import OPS_TITLES

    head1: list[tuple[str, int]] = [("Backbone", 1), ("Metric", 1)]
    for ops in present_ops:
        n = sum(1 for o, _ in columns if o == ops)
        if n:
            head1.append((OPS_TITLES.get(ops, ops), n))
    header = [head1, [("", 1), ("", 1)] + [(TITLES[m], 1) for _, m in columns]]
    t = Table(
        "table3",
        "Table 3: Track B, advanced operations",
        "Score with the operation set enabled and its change against the same model's Track A run; "
        "Registration on Longitudinal MRI against the unregistered control (operation set `none`) when "
        "present. Green: improvement, red: degradation, grey: no change.",
        header,
    )
    t.label_cols = 2
    models = sorted({c[:2] + c[4:] for c in b_configs})
    all_cfgs = b_configs
    for key in models:
        block = []
        for metric, kind in (("task", ""), ("strict", "strict"), ("loc", "loc")):
            cells = [Cell(metric.capitalize() if metric != "loc" else "Loc.", "label")]
            for ops, m in columns:
                cfg = next((c for c in all_cfgs if c[:2] + c[4:] == key and c[3] == ops), None)
                if cfg is None or (metric == "loc" and m == "longitudinal_mri"):
                    cells.append(Cell(None, kind))
                    continue
                s = module_stats(groups[cfg], m)
                ref_cfg = None
                if ops == "registration" and m == "longitudinal_mri":
                    ref_cfg = _matched(groups, cfg, "B", "none")
                ref_cfg = ref_cfg or _matched(groups, cfg, "A")
                ref = module_stats(groups[ref_cfg], m) if ref_cfg else None
                v = _get(s, metric)
                cells.append(Cell(v, kind, _delta(v, _get(ref, metric))))
            block.append(cells)
        label = _label((key[0], key[1], "B", "", key[2], key[3], key[4]), [c for c in all_cfgs])
        for n, cells in enumerate(block):
            t.rows.append([Cell(label if n == 0 else "", "label"), *cells])
    return t


# ----- Tables 5 and 7 -----

T5_HEAD = [
    [("Model", 1), ("Longitudinal MRI", 8), ("Brain MRI", 3), ("Lung PET/CT", 8)],
    [
        ("", 1),
        ("Evidence fields", 6),
        ("Answer + evidence", 2),
        ("Answer + evidence", 2),
        ("Grounding", 1),
        ("Answer + subtasks", 6),
        ("Evidence + grounding", 2),
    ],
    [("", 1)]
    + [(FIELD_TITLES[f], 1) for f in RANO_FIELDS]
    + [(h, 1) for h in ("Task", "Strict", "Task", "Strict", "Loc.", "Task")]
    + [(LUNG_TITLES[q], 1) for q in "12345"]
    + [("Strict", 1), ("Loc.", 1)],
]


def _t5_cells(rows: list[dict[str, Any]]) -> list[Cell]:
    lo, br, lu = (module_stats(rows, m) for m in RADIOLOGY)
    lf = (lo or {}).get("fields", {})
    uf = (lu or {}).get("fields", {})
    return (
        [Cell(lf.get(f), "field") for f in RANO_FIELDS]
        + [
            Cell(_get(lo, "task")),
            Cell(_get(lo, "strict"), "strict"),
            Cell(_get(br, "task")),
            Cell(_get(br, "strict"), "strict"),
            Cell(_get(br, "loc"), "loc"),
            Cell(_get(lu, "task")),
        ]
        + [Cell(uf.get(q), "field") for q in "12345"]
        + [Cell(_get(lu, "strict"), "strict"), Cell(_get(lu, "loc"), "loc")]
    )


def table5(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    configs = [c for c in _track_configs(groups, "A") if _has_any(groups[c], RADIOLOGY)]
    t = Table(
        "table5",
        "Table 5: Detailed viewer-native radiology metrics (Track A)",
        "Per-field accuracy of the six CURRENT-study lesion-state fields (scorable fields only), Lung PET/CT "
        "subtask accuracies; grey: fine-grained metrics, yellow: Strict, blue: localization.",
        [list(h) for h in T5_HEAD],
    )
    _add_group_rows(t, groups, configs, lambda cfg: _t5_cells(groups[cfg]))
    return t


def table7(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    configs = [c for c in _track_configs(groups, "A") if _has_any(groups[c], RADIOLOGY)]
    budgets: dict[tuple[Any, ...], set[int]] = defaultdict(set)
    for c in configs:
        budgets[(c[0], c[1], c[5], c[6])].add(c[4])
    head = [[("Backbone", 1), ("Max ops.", 1), *T5_HEAD[0][1:]]] + [[("", 1), ("", 1), *h[1:]] for h in T5_HEAD[1:]]
    t = Table(
        "table7",
        "Table 7: Operation-budget study (Track A)",
        "Models run at more than one operation budget (`bench run --budget N`); columns as Table 5.",
        head,
    )
    t.label_cols = 2
    for key in sorted(k for k, b in budgets.items() if len(b) > 1):
        members = sorted((c for c in configs if (c[0], c[1], c[5], c[6]) == key), key=lambda c: c[4])
        t.groups.append((len(t.rows), _label(members[0], configs, with_budget=False)))
        for cfg in members:
            t.rows.append(
                [
                    Cell(_label(cfg, configs, with_budget=False), "label"),
                    Cell(str(cfg[4]), "label"),
                    *_t5_cells(groups[cfg]),
                ]
            )
    return t


# ----- Table 6 -----


def table6(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    configs = [c for c in _track_configs(groups, "C") if _has_any(groups[c], RADIOLOGY)]
    header = [
        [("Backbone", 1), ("Longitudinal MRI", 2), ("Brain MRI", 3), ("Lung PET/CT", 3)],
        [("", 1)] + [(h, 1) for h in ("Task", "Strict", "Task", "Strict", "Loc.", "Task", "Strict", "Loc.")],
    ]
    t = Table(
        "table6",
        "Table 6: Runtime-agnostic track (Track C)",
        "Alternative-runtime score and its change against the matched Track A run of the same model; rows "
        "without a Track A run of that model are Alt. only.",
        header,
    )
    matched = [c for c in configs if _matched(groups, c, "A")]
    alt = [c for c in configs if c not in matched]
    for title, members in (("Matched to Track A", matched), ("Alt. only", alt)):
        if not members:
            continue
        t.groups.append((len(t.rows), title))
        for cfg in members:
            ref_cfg = _matched(groups, cfg, "A")
            cells = []
            for m, metrics in (
                ("longitudinal_mri", ("task", "strict")),
                ("brain_mri", ("task", "strict", "loc")),
                ("lung_petct", ("task", "strict", "loc")),
            ):
                s = module_stats(groups[cfg], m)
                ref = module_stats(groups[ref_cfg], m) if ref_cfg else None
                for metric in metrics:
                    v = _get(s, metric)
                    kind = "" if metric == "task" else metric
                    cells.append(Cell(v, kind, _delta(v, _get(ref, metric)) if ref_cfg else None))
            t.rows.append([Cell(_label(cfg, configs), "label"), *cells])
    return t


def paper_tables(rows: list[dict[str, Any]]) -> list[Table]:
    return [table1(rows), table2(rows), table3(rows), table5(rows), table6(rows), table7(rows)]


# ----- rendering -----


def _delta_class(delta: float | None) -> str:
    if delta is None:
        return ""
    return " same" if abs(delta) < EPS else " up" if delta > 0 else " down"


def to_html(table: Table) -> str:
    head = "".join(
        "<tr>" + "".join(f'<th colspan="{n}">{html.escape(text)}</th>' for text, n in level) + "</tr>"
        for level in table.header
    )
    width = sum(n for _, n in table.header[0])
    group_at = dict(table.groups)
    body = []
    for i, row in enumerate(table.rows):
        if i in group_at:
            body.append(f'<tr class="group"><td class="l" colspan="{width}">{html.escape(group_at[i])}</td></tr>')
        cells = []
        for c in row:
            cls = ("l " if c.kind == "label" else "") + c.kind + _delta_class(c.delta)
            cells.append(f'<td class="{cls.strip()}">{html.escape(c.text())}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    empty = "" if table.rows else f'<tr><td class="l muted" colspan="{width}">no runs of this kind</td></tr>'
    return (
        f'<h2 id="{table.key}">{html.escape(table.title)}</h2><table class="paper" data-table="{table.key}">'
        f'{head}{"".join(body)}{empty}</table><p class="caption">{html.escape(table.caption)}</p>'
    )


def _flat_header(table: Table) -> list[str]:
    """One column name per column: the header levels joined with ' / '."""
    names: list[list[str]] = []
    for level in table.header:
        flat: list[str] = []
        for text, n in level:
            flat += [text] * n
        names.append(flat)
    width = len(names[0])
    return [" / ".join(dict.fromkeys(lv[i] for lv in names if i < len(lv) and lv[i])) for i in range(width)]


def to_markdown(table: Table) -> str:
    cols = _flat_header(table)
    group_at = dict(table.groups)
    lines = [f"### {table.title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for i, row in enumerate(table.rows):
        if i in group_at:
            lines.append(f"| **{group_at[i]}** |" + " |" * (len(cols) - 1))
        lines.append("| " + " | ".join(c.text() for c in row) + " |")
    return "\n".join([*lines, "", table.caption, ""])


def to_csv(tables: list[Table]) -> str:
    """One CSV: table, group, column and value (and delta) per cell: easy to filter or pivot."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["table", "group", "row", "column", "value", "delta"])
    for t in tables:
        cols = _flat_header(t)
        group = ""
        group_at = dict(t.groups)
        for i, row in enumerate(t.rows):
            group = group_at.get(i, group)
            label = " ".join(c.text() for c in row[: t.label_cols] if c.text())
            for col, c in zip(cols[t.label_cols :], row[t.label_cols :], strict=False):
                value = "" if c.value is None else c.value if isinstance(c.value, str) else f"{c.value:.6f}"
                delta = "" if c.delta is None else f"{c.delta:.6f}"
                w.writerow([t.key, group, label, col, value, delta])
    return buf.getvalue()
