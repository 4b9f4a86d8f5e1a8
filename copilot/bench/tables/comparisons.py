"""Model against model: configurations equal in every key but the model (and its policy) compared on the cases
both ran, per module and score — paired deltas with a paired bootstrap interval and a sign-flip permutation p
over cases (a case's repeats averaged first). The offline floors are never a side."""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations
from typing import Any

from copilot.bench.scoring.module_facts import title as module_title
from copilot.bench.scoring.stats import delta_ci, mean, sign_flip_p
from copilot.bench.tables.aggregate import HEADS, Cfg, configurations, is_floor, metrics, module_stats
from copilot.bench.tables.render import Cell, Table


def _setting(cfg: Cfg) -> str:
    """What the two sides share, in words."""
    parts = [f"Track {cfg.track}" + (f"/{cfg.ops}" if cfg.ops else ""), cfg.protocol, f"budget {cfg.budget}"]
    parts += [cfg.backend] if cfg.backend != "embedded" else []
    parts += [f"seed {cfg.seed}"] if cfg.seed else []
    parts += [f"rules {cfg.rules}"] if cfg.rules else []
    return ", ".join(parts)


def model_pairs_table(rows: list[dict[str, Any]]) -> Table:
    """Every pair of models run under the same setting: A − B per module and score over their common cases."""
    groups = configurations(rows)
    header = [[("Models (A − B)", 1), ("Setting", 1), ("Module", 1), ("Score", 1), ("A", 1), ("B", 1),
               ("A − B", 1), ("Sign-flip p", 1)]]  # fmt: skip
    t = Table(
        "model_pairs",
        "Model against model: paired deltas over cases",
        "Configurations equal in every key but the model, on the cases both ran (a case's repeats averaged "
        "first): A and B their means over those cases, A − B the mean paired difference with its paired "
        "bootstrap 95% CI (cases resampled jointly), and the two-sided sign-flip permutation p (exact up to 12 "
        "cases, else 10,000 seeded draws). n: the common cases.",
        header,
    )
    t.label_cols = 4
    by_setting: dict[Cfg, list[Cfg]] = defaultdict(list)
    for cfg in groups:
        if not is_floor(cfg.policy):
            by_setting[cfg._replace(model="", policy="")].append(cfg)
    for setting in sorted(by_setting):
        for a, b in combinations(sorted(by_setting[setting]), 2):
            common_modules = sorted({r["module"] for r in groups[a]} & {r["module"] for r in groups[b]})
            for module in common_modules:
                sa, sb = module_stats(groups[a], module) or {}, module_stats(groups[b], module) or {}
                for metric in metrics(module):
                    pa, pb = sa[metric].per_case, sb[metric].per_case
                    cases = sorted(set(pa) & set(pb))
                    if not cases:
                        continue
                    diffs = [pa[c] - pb[c] for c in cases]
                    kind = "" if metric == "task" else metric
                    t.rows.append([
                        Cell(f"{a.model} − {b.model}", "label"), Cell(_setting(a), "label"),
                        Cell(module_title(module), "label"), Cell(HEADS[metric], "label"),
                        Cell(mean([pa[c] for c in cases]), kind, n=len(cases)),
                        Cell(mean([pb[c] for c in cases]), kind, n=len(cases)),
                        Cell(mean(diffs), kind, n=len(cases), ci=delta_ci(pa, pb)),
                        Cell(sign_flip_p(diffs)),
                    ])  # fmt: skip
    return t
