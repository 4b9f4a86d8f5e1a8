"""What the paper's tables share, from result rows alone: run configurations, a module's scores over them
(`Stat`: mean, n, 95 % CI, errors), score and mean cells, and the row groups every table is laid out in.

A configuration is (model, policy, track, ops, protocol, budget, backend, seed); its score on a module is the
mean over its scored episodes (repeats included; errored episodes are counted apart and shown as
"error k/n", never averaged as zeros). Scores are fractions, as in the paper.

- n: the number of cases behind a cell; the scored runs (cases × repeats) are shown apart when they differ.
- 95 % CI: percentile bootstrap over cases (a case's repeats are averaged first, then cases are resampled
  with replacement), `BOOTSTRAP` resamples from a generator seeded with `BOOTSTRAP_SEED`, so a report is
  reproducible; a change (Δ) gets a paired interval: the per-case differences over the cases both runs hold,
  resampled jointly (identical runs give Δ 0.00 [0.00, 0.00]).
- Model Avg. and "Mean over reported" cells: their n is the cases behind them (runs apart) and their CI averages the
  columns' resampled means (each column's cases drawn on their own stream).
- Groups as the paper's: General-purpose and Medical-domain models (Tables 1–3, 7), Closed-source and
  Open-weight models (Table 5), 2D slice-montage backbones and native 3D VLMs (Table 6), each model's access
  type and family from `model_table` (answers scored by `bench score` are their model's rows); then reference
  policies (the offline floors `prior`, `baseline`, scripted, which are never in a mean) and budget-study
  runs (call-budget runs, the unit of Table 7: budgets other than the paper's 20 under `budget_unit=auto`,
  any budget under `budget_unit=calls`; never in a mean, so a table's main rows count rounds only).
  "Mean over reported" averages a group's rows.
- Bold: the best value of a column within a model group.
- Deltas compare with the same model's configuration on another track (`matched`: same protocol, budget and
  backend when present).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from copilot.bench.scoring.module_facts import facts_of
from copilot.bench.scoring.module_facts import title as module_title
from copilot.bench.scoring.rules import unit_of
from copilot.bench.scoring.stats import bootstrap_ci, bootstrap_means, case_seed, delta_ci, mean, mean_ci
from copilot.bench.tables.model_table import ACCESS_TITLES, FAMILY_TITLES, model_info
from copilot.bench.tables.render import Cell, Table

FLOORS = ("prior", "baseline", "scripted:")  # reference policies: shown, never in a mean
PAPER_BUDGET = 20  # the paper's operation budget (Table 8: 20 rounds for every module)
TRACK_C_BUDGET = PAPER_BUDGET


class Cfg(NamedTuple):
    model: str
    policy: str
    track: str
    ops: str
    protocol: str
    budget: int
    backend: str
    seed: int
    rules: str = ""  # the run's rules that depart from the paper's reading (`copilot.bench.scoring.rules.rules_key`)


@dataclass
class Stat:
    """A mean over episodes with its n, bootstrap CI and error count; `per_case` feeds the CI of a change."""

    value: float | None
    n: int = 0  # cases (the bootstrap's unit)
    ci: tuple[float, float] | None = None
    errors: int = 0
    total: int = 0
    per_case: dict[str, float] = field(default_factory=dict)  # case id → the mean of its repeats
    unchecked: int = 0  # episodes whose gate passed an item without checking it (marked †)
    runs: int = 0  # scored runs behind the value (cases × repeats)


def stat_of(rows: list[dict[str, Any]], value: Any) -> Stat:
    """The mean of `value(row)` (None: not in the denominator) over scored rows, per case first for the CI."""
    scored = [r for r in rows if r.get("status") != "error"]
    per: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        v = value(r)
        if v is not None:
            per[r["case_id"]].append(float(v))
    flat = [v for vs in per.values() for v in vs]
    per_case = {c: sum(vs) / len(vs) for c, vs in per.items()}
    errors = len(rows) - len(scored)
    return Stat(mean(flat), len(per_case), bootstrap_ci(list(per_case.values())), errors, len(rows), per_case,
                runs=len(flat))  # fmt: skip


# ----- aggregation -----


def cfg_of(r: dict[str, Any]) -> Cfg:
    return Cfg(r["model"], r["policy"], r["track"], r.get("ops", ""), r.get("protocol", "harness"), r["budget"],
               r.get("backend", "embedded"), r.get("seed", 0), r.get("rules") or "")  # fmt: skip


def configurations(rows: list[dict[str, Any]]) -> dict[Cfg, list[dict[str, Any]]]:
    groups: dict[Cfg, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[cfg_of(r)].append(r)
    return dict(groups)


def module_stats(rows: list[dict[str, Any]], module: str) -> dict[str, Any] | None:
    """Task, Strict, Loc (as `Stat`) and per-field accuracies of one module over some rows (None without rows)."""
    mine = [r for r in rows if r["module"] == module]
    if not mine:
        return None
    strict = stat_of(mine, lambda r: r["strict"])
    strict.unchecked = sum(1 for r in mine if (r.get("details") or {}).get("unchecked"))
    out: dict[str, Any] = {
        "n": len(mine),
        "task": stat_of(mine, lambda r: r["task"]),
        "strict": strict,
        "loc": stat_of(mine, lambda r: r["loc"]),
    }
    names = {k for r in mine for k in (r.get("details") or {}).get("fields", {})}
    out["fields"] = {
        k: stat_of(mine, lambda r, k=k: _field_value((r.get("details") or {}).get("fields", {}).get(k))) for k in names
    }
    return out


def _field_value(f: dict[str, Any] | None) -> float | None:
    return None if f is None or f.get("correct") is None else float(f["correct"])


def is_floor(policy: str) -> bool:
    """A reference policy (prior, baseline, scripted): shown apart from the backbones, never in a mean."""
    return any(policy == p or policy.startswith(p) for p in FLOORS)



def model_group(model: str, policy: str = "", scheme: str = "scope") -> str:
    """A model's row group: by scope (General-purpose / Medical-domain, Tables 1–3 and 7), by access type
    (Closed-source / Open-weight, Table 5) or, for Track C (Table 6), by backbone with native 3D VLMs apart
    (`model_table`, an editable table of the paper's models)."""
    info = model_info(model, policy)
    if scheme == "access":
        return ACCESS_TITLES[info.access]
    if scheme == "montage":
        return "Native 3D VLM (Alt. only)" if info.family == "native3d" else {
            "general": "2D slice-montage: general-purpose backbones",
            "medical": "2D slice-montage: medical-domain backbones"}[info.family]  # fmt: skip
    return FAMILY_TITLES["medical" if info.family == "medical" else "general"]


GROUP_ORDER = {
    "scope": (FAMILY_TITLES["general"], FAMILY_TITLES["medical"]),
    "access": (ACCESS_TITLES["closed"], ACCESS_TITLES["open"]),
    "montage": ("2D slice-montage: general-purpose backbones", "2D slice-montage: medical-domain backbones",
                "Native 3D VLM (Alt. only)"),
}  # fmt: skip


def config_label(cfg: Any, configs: list[Any], with_budget: bool = True) -> str:
    """The model name, with every key that differs among the table's rows of that model: policy, track,
    operation set, protocol, budget, backend, seed and rules."""
    cfg = Cfg(*cfg)
    same = [Cfg(*c) for c in configs if c[0] == cfg.model]
    parts = [cfg.model]
    if len({c.policy for c in same}) > 1:
        parts.append(cfg.policy)
    if len({c.track for c in same}) > 1:
        parts.append(f"Track {cfg.track}")
    if len({c.ops for c in same}) > 1 and cfg.ops:
        parts.append(cfg.ops)
    if len({c.protocol for c in same}) > 1:
        parts.append(cfg.protocol)
    if with_budget and len({c.budget for c in same}) > 1:
        parts.append(f"budget {cfg.budget}")
    if len({c.backend for c in same}) > 1:
        parts.append(cfg.backend)
    if len({c.seed for c in same}) > 1:
        parts.append(f"seed {cfg.seed}")
    if len({c.rules for c in same}) > 1:
        parts.append(f"rules {cfg.rules or 'paper'}")
    if cfg.policy == "answers" and "answers" not in parts:
        parts.append("scored answers")
    return parts[0] + (f" ({', '.join(parts[1:])})" if parts[1:] else "")


def track_configs(groups: dict[Cfg, list[dict[str, Any]]], track: str, ops: str | None = None) -> list[Cfg]:
    """The configurations of one track (and operation set), sorted."""
    return sorted(c for c in groups if c.track == track and (ops is None or c.ops == ops))


def call_budget(cfg: Cfg) -> bool:
    """A run whose budget counts agent handler calls (Table 7's unit), not tool-calling rounds (Table 1's);
    budget 0 is no budget (answers scored by `bench score`, Track C)."""
    return cfg.budget > 0 and unit_of(cfg.rules, cfg.budget) == "calls"


def _budget_study(cfg: Cfg, configs: list[Cfg]) -> bool:
    """A call-budget run (the budget study's unit; `--budget 20 --rule budget_unit=calls` included): one unit
    per table, so the main groups hold round-budget runs only."""
    return call_budget(cfg)


def _grouped(configs: list[Cfg], scheme: str = "scope") -> list[tuple[str, list[Cfg], bool]]:
    """(title, members, in means) in table order: the model groups of `scheme` (answer files scored by `bench
    score` are a model's rows on their track), then the floors and the budget study, never in a mean."""
    study = [c for c in configs if _budget_study(c, configs)]
    main = [c for c in configs if c not in study]
    out: list[tuple[str, list[Cfg], bool]] = []
    for title in GROUP_ORDER[scheme]:
        members = [c for c in main if not is_floor(c.policy) and model_group(c.model, c.policy, scheme) == title]
        out.append((title, members, True))
    out.append(("Reference policies (floors; not in means)", [c for c in main if is_floor(c.policy)], False))
    out.append(("Budget study (Table 7; not in means)", study, False))
    return [(t, m, inm) for t, m, inm in out if m]


def add_group_rows(
    table: Table, groups: dict, configs: list, cells_for, label_configs: list | None = None, scheme: str = "scope"
) -> None:
    """Rows per configuration under group titles (`scheme`: see `model_group`); a group in means with two or
    more rows gets a mean-over-reported row; the best value of each column within a group is bold."""
    for title, members, in_means in _grouped(configs, scheme):
        table.groups.append((len(table.rows), title))
        block = []
        for cfg in members:
            cells = cells_for(cfg)
            block.append(cells)
            table.rows.append([Cell(config_label(cfg, label_configs or configs), "label"), *cells])
        if in_means and len(block) > 1:
            _bold_best(block)
            means = []
            for col in range(len(block[0])):
                reported = [b[col] for b in block if isinstance(b[col].value, float)]
                means.append(mean_cell(reported, block[0][col].kind))
            table.rows.append([Cell("Mean over reported", "label"), *means])


def _bold_best(block: list[list[Cell]]) -> None:
    for col in range(len(block[0])):
        vals = [v for b in block if isinstance(v := b[col].value, float)]
        if len(vals) < 2:
            continue
        best = max(vals)
        for b in block:
            v = b[col].value
            if isinstance(v, float) and abs(v - best) < 1e-12:
                b[col].bold = True


def score_cell(stats: dict[str, Any] | None, key: str, kind: str = "", ref: dict[str, Any] | None = None) -> Cell:
    """A score cell with n, CI, errors, the † mark, and (with `ref`) its change and the change's CI."""
    st = None if stats is None else stats.get(key)
    if not isinstance(st, Stat):
        return Cell(None, kind)
    c = Cell(st.value, kind, n=st.n, ci=st.ci, errors=st.errors, total=st.total, cases=len(st.per_case),
             runs=st.runs)  # fmt: skip
    if st.per_case:
        c.boot = bootstrap_means(list(st.per_case.values()), seed=case_seed(st.per_case))
    if key == "strict" and st.unchecked:
        c.mark = "†"
    r = None if ref is None else ref.get(key)
    if isinstance(r, Stat) and st.value is not None and r.value is not None:
        c.delta = st.value - r.value
        c.delta_ci = delta_ci(st.per_case, r.per_case)  # paired: the cases both runs hold, resampled jointly
    return c


def mean_cell(cells: list[Cell], kind: str = "") -> Cell:
    """The mean of cells (Model Avg., Mean over reported) with n (the cases behind it, runs apart) and a 95 % CI from
    the cells' resampled means; empty when a cell is empty."""
    values = [c.value for c in cells if isinstance(c.value, float)]
    if not cells or len(values) < len(cells):
        return Cell(None, kind)
    value = sum(values) / len(values)
    boots = [c.boot for c in cells if c.boot is not None]
    whole = len(boots) == len(cells)
    cases = sum(c.cases for c in cells)
    out = Cell(value, kind, n=sum(c.n or 0 for c in cells) or None, ci=mean_ci(boots, cases) if whole else None,
               runs=sum(c.runs for c in cells))  # fmt: skip
    if whole:  # a mean of means (the group's mean of Model Avg.) resamples the same way
        out.boot, out.cases = sum(boots) / len(boots), cases
    return out


def protocol_note(configs: list[Cfg]) -> str:
    """A caption's closing note naming the protocols the table's rows ran under."""
    found = sorted({c.protocol for c in configs})
    return f" Protocol: {', '.join(found)}." if found else ""


def has_any(rows: list[dict[str, Any]], modules: tuple[str, ...]) -> bool:
    """Whether some row is of one of `modules`."""
    return any(r["module"] in modules for r in rows)


def has_loc(module: str) -> bool:
    """Whether a module scores localization (unknown modules do)."""
    f = facts_of(module)
    return f is None or f.has_loc


def metrics(module: str) -> tuple[str, ...]:
    """The scores a module's column group shows: Task, Strict, and Loc. where it has one."""
    return ("task", "strict", "loc") if has_loc(module) else ("task", "strict")


HEADS = {"task": "Task", "strict": "Strict", "loc": "Loc."}


def group_header(first: str, modules: tuple[str, ...], extra: list[tuple[str, int]] | None = None) -> list:
    """Two header rows: each module's title over its Task / Strict / Loc. columns."""
    extra = extra or []
    return [
        [(first, 1)] + [(module_title(m), len(metrics(m))) for m in modules] + extra,
        [("", 1)] + [(HEADS[k], 1) for m in modules for k in metrics(m)] + [(h, 1) for h, n in extra
                                                                               for h in ("Task", "Strict", "Loc.")[:n]],
    ]  # fmt: skip


def matched(groups: dict, cfg: Cfg, track: str, ops: str = "", budget: int | None = None) -> Cfg | None:
    """The same model's configuration on another track: same protocol, budget (or `budget`) and backend
    when present."""
    want = cfg.budget if budget is None else budget
    cands = [c for c in groups if c.model == cfg.model and c.track == track and c.ops == ops]
    if not cands:
        return None
    return sorted(cands, key=lambda c: (c.protocol != cfg.protocol, c.budget != want, c.backend != cfg.backend,
                                        c.seed != cfg.seed, c.policy != cfg.policy, c))[0]  # fmt: skip
