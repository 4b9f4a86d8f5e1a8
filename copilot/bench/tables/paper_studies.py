"""The paper's tables beyond the main scores: detailed radiology metrics (Table 5), the runtime-agnostic track
(Table 6), the operation-budget study (Table 7), Pass@k over repeats and the protocols side by side.

Track C (Table 6) is matched to the Track A run at the paper's budget of 20 (`TRACK_C_BUDGET`), same protocol
first. Cells, groups and statistics: `aggregate`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from copilot.bench.scoring.module_facts import DetailColumns, all_facts, facts_of, in_table
from copilot.bench.scoring.module_facts import title as module_title
from copilot.bench.scoring.rules import without_unit
from copilot.bench.scoring.stats import mean, pass_at_k, pass_hat_k
from copilot.bench.tables.aggregate import (
    TRACK_C_BUDGET,
    Cfg,
    Stat,
    add_group_rows,
    call_budget,
    config_label,
    configurations,
    group_header,
    has_any,
    matched,
    metrics,
    module_stats,
    protocol_note,
    score_cell,
    track_configs,
)
from copilot.bench.tables.render import Cell, Table


def _field_cell(stats: dict[str, Any] | None, name: str) -> Cell:
    st = (stats or {}).get("fields", {}).get(name)
    if not isinstance(st, Stat):
        return Cell(None, "field")
    return Cell(st.value, "field", n=st.n, ci=st.ci, runs=st.runs)


# ----- Tables 5 and 7 -----


def _detailed() -> tuple[str, ...]:
    """The modules with detailed-metrics columns (Tables 5 and 7), in table order."""
    return tuple(f.name for f in all_facts() if f.details)


def _details(module: str) -> tuple[DetailColumns, ...]:
    f = facts_of(module)
    return f.details if f else ()


def t5_head() -> list[list[tuple[str, int]]]:
    """Three header rows: each module over its headings, each heading over its columns."""
    mods = _detailed()
    return [
        [("Model", 1)] + [(module_title(m), sum(len(g.columns) for g in _details(m))) for m in mods],
        [("", 1)] + [(g.title, len(g.columns)) for m in mods for g in _details(m)],
        [("", 1)] + [(h, 1) for m in mods for g in _details(m) for h, _ in g.columns],
    ]


def _t5_cells(rows: list[dict[str, Any]]) -> list[Cell]:
    out = []
    for m in _detailed():
        s = module_stats(rows, m)
        for g in _details(m):
            for _, key in g.columns:
                if key.startswith("field:"):
                    out.append(_field_cell(s, key.removeprefix("field:")))
                else:
                    out.append(score_cell(s, key, "" if key == "task" else key))
    return out


def table5(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    configs = [c for c in track_configs(groups, "A") if has_any(groups[c], _detailed())]
    t = Table(
        "table5",
        "Table 5: Detailed viewer-native radiology metrics (Track A)",
        "Per-field accuracy of the six CURRENT-study lesion-state fields (scorable fields only), Lung PET/CT "
        "subtask accuracies; grey: fine-grained metrics, yellow: Strict, blue: localization." + protocol_note(configs),
        t5_head(),
    )
    add_group_rows(t, groups, configs, lambda cfg: _t5_cells(groups[cfg]), scheme="access")
    return t


def table7(rows: list[dict[str, Any]]) -> Table:
    """The operation-budget study from call-budget runs only (one unit per table): rows of one configuration
    differing in their budget, round-budget runs (the main budget of 20) left to Table 1."""
    groups = configurations(rows)
    configs = [c for c in track_configs(groups, "A") if has_any(groups[c], _detailed()) and call_budget(c)]
    budgets: dict[Cfg, list[Cfg]] = defaultdict(list)
    for c in configs:
        budgets[c._replace(budget=0, rules=without_unit(c.rules))].append(c)
    t5 = t5_head()
    head = [[("Backbone", 1), ("Max ops.", 1), *t5[0][1:]]] + [[("", 1), ("", 1), *h[1:]] for h in t5[1:]]
    t = Table(
        "table7",
        "Table 7: Operation-budget study (Track A)",
        "Call-budget runs (`bench run --budget N`; at the paper's 20 with `--rule budget_unit=calls`); Max ops.: "
        "the most agent handler calls an episode may make, every call counting however many a round holds. "
        "Round-budget runs (the main budget of 20 tool-calling rounds) are Table 1's, never mixed in here; "
        "columns as Table 5." + protocol_note(configs),
        head,
    )
    t.label_cols = 2
    for key in sorted(budgets):
        members = sorted(budgets[key], key=lambda c: c.budget)
        t.groups.append((len(t.rows), config_label(members[0], configs, with_budget=False)))
        for cfg in members:
            t.rows.append(
                [
                    Cell(config_label(cfg, configs, with_budget=False), "label"),
                    Cell(f"{cfg.budget} calls", "label"),
                    *_t5_cells(groups[cfg]),
                ]
            )
    return t


# ----- Table 6 -----


def table6(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    radiology = in_table(1)
    configs = [c for c in track_configs(groups, "C") if has_any(groups[c], radiology)]
    header = group_header("Backbone", radiology)
    t = Table(
        "table6",
        "Table 6: Runtime-agnostic track (Track C)",
        f"Alternative-runtime score and its change against the same model's Track A run at the paper's budget "
        f"({TRACK_C_BUDGET}; same protocol first); rows without a Track A run of that model are Alt. only. Groups "
        "as the paper: 2D slice-montage general-purpose and medical-domain backbones, native 3D VLMs. "
        "†: the lung source-series check needs a trace and was passed by rule (untraced_source_series=pass).",
        header,
    )

    def cells(cfg: Cfg) -> list[Cell]:
        ref_cfg = matched(groups, cfg, "A", budget=TRACK_C_BUDGET)
        out = []
        for m in radiology:
            s = module_stats(groups[cfg], m)
            ref = module_stats(groups[ref_cfg], m) if ref_cfg else None
            out += [score_cell(s, metric, "" if metric == "task" else metric, ref) for metric in metrics(m)]
        return out

    add_group_rows(t, groups, configs, cells, scheme="montage")
    for row in t.rows:  # name the Track A run each change is against
        cfg = next((c for c in configs if config_label(c, configs) == row[0].value), None)
        ref_cfg = matched(groups, cfg, "A", budget=TRACK_C_BUDGET) if cfg is not None else None
        if ref_cfg is not None:
            row[0] = Cell(f"{row[0].value} vs A b{ref_cfg.budget}"
                          + (f" {ref_cfg.protocol}" if ref_cfg.protocol != "harness" else ""), "label")  # fmt: skip
        elif cfg is not None:
            row[0] = Cell(f"{row[0].value} (Alt. only)", "label")
    return t


# ----- repeats and protocols -----


def passk_table(rows: list[dict[str, Any]]) -> Table:
    """Pass@k and pass^k over repeats, per configuration and module: k = the fewest runs any case of the row
    has (at least 2), every case's runs counted (the unbiased estimators of `stats`), so Pass@1 ≤ Pass@k."""
    groups = configurations(rows)
    header = [[("Configuration", 1), ("Module", 1), ("Cases", 1), ("Runs per case", 1), ("k", 1),
               ("Pass@1 (Task)", 1), ("Pass@k (Task)", 1), ("Pass@k (Strict)", 1), ("pass^k (Strict)", 1),
               ("Answer agreement", 1)]]  # fmt: skip
    t = Table(
        "passk",
        "Pass@k, pass^k and answer agreement over repeats (`bench run --repeats k`)",
        "Per case with n runs and c successes (Task = 1, or Strict = 1): Pass@k = 1 − C(n−c, k)/C(n, k), the "
        "unbiased estimator (Chen et al. 2021), and pass^k = C(c, k)/C(n, k) (τ-bench), averaged over cases; k "
        "is the fewest runs a case of the row has (never more: Pass@k from fewer runs than k is refused); "
        "Cases is n, the runs per case are shown apart. Answer agreement: share of a case's runs giving its "
        "most common answer, averaged over cases.",
        header,
    )
    t.label_cols = 5
    configs = sorted(groups)
    for cfg in configs:
        for module in sorted({r["module"] for r in groups[cfg]}):
            by_case: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for r in groups[cfg]:
                if r["module"] == module and r.get("status") != "error":
                    by_case[r["case_id"]].append(r)
            if not by_case:
                continue
            sizes = sorted({len(v) for v in by_case.values()})
            k = sizes[0]
            if k < 2:
                continue
            agree = []
            for reps in by_case.values():
                answers = [json_key(r) for r in reps]
                agree.append(max(answers.count(a) for a in answers) / len(answers))
            runs = str(k) if len(sizes) == 1 else f"{k}–{sizes[-1]}"
            cases = len(by_case)
            per_case = list(by_case.values())
            t.rows.append([
                Cell(config_label(cfg, configs), "label"), Cell(module_title(module), "label"),
                Cell(str(cases), "label"), Cell(runs, "label"), Cell(str(k), "label"),
                _estimate(per_case, "task", 1), _estimate(per_case, "task", k), _estimate(per_case, "strict", k),
                _estimate(per_case, "strict", k, pass_hat_k), Cell(mean(agree), n=cases),
            ])  # fmt: skip
    return t


def _estimate(by_case: list[list[dict[str, Any]]], metric: str, k: int, f: Any = pass_at_k) -> Cell:
    """A Pass@k-family estimate averaged over cases (success: the metric is 1), n = cases."""
    vals = [f(sum(r[metric] >= 1.0 for r in runs), len(runs), k) for runs in by_case]
    return Cell(mean(vals), "strict" if metric == "strict" else "", n=len(by_case))


def json_key(row: dict[str, Any]) -> str:
    """A row's answer as a comparable string (the given value of each scored field)."""
    fields = (row.get("details") or {}).get("fields", {})
    return "|".join(f"{k}={v.get('given')}" for k, v in sorted(fields.items()))


def protocol_table(rows: list[dict[str, Any]]) -> Table:
    """The harness effect: the same model and track under both protocols, side by side, with the change."""
    groups = configurations(rows)
    header = [[("Model", 1), ("Module", 1), ("Metric", 1), ("paper", 1), ("harness", 1), ("harness − paper", 1)]]
    t = Table(
        "protocols",
        "Protocols side by side: the harness effect",
        "The same model, track, budget and backend run with the paper's tool surface (`--protocol paper`) and "
        "with the product's (`harness`: evidence handlers, workflow guards); the change is harness − paper, "
        "with its 95% CI.",
        header,
    )
    t.label_cols = 3
    configs = sorted(groups)
    for cfg in [c for c in configs if c.protocol == "paper"]:
        twin = cfg._replace(protocol="harness")
        if twin not in groups:
            continue
        for module in [f.name for f in all_facts() if has_any(groups[cfg], (f.name,))]:
            p, h = module_stats(groups[cfg], module), module_stats(groups[twin], module)
            for metric, kind in (("task", ""), ("strict", "strict"), ("loc", "loc")):
                pc, hc = score_cell(p, metric, kind), score_cell(h, metric, kind, p)
                if pc.value is None and hc.value is None:
                    continue
                change = Cell(hc.delta, kind, ci=hc.delta_ci)
                t.rows.append([Cell(f"{cfg.model} (Track {cfg.track}, budget {cfg.budget})", "label"),
                               Cell(module_title(module), "label"),
                               Cell({"task": "Task", "strict": "Strict", "loc": "Loc."}[metric], "label"),
                               pc, Cell(hc.value, kind, n=hc.n, ci=hc.ci, runs=hc.runs), change])  # fmt: skip
    return t
