"""Answer agreement over repeated runs and a ranking measure: repeats of one case are raters of one item, so
answer agreement over repeats is Cohen's κ (two repeats), Fleiss' κ (a fixed number of repeats) and
Krippendorff's α (nominal, any number of repeats) — a stability measure of this project, not a seed's (seed
000's weighted κ and interval α are over reviewers' checkpoint statuses: `review.py`); AUPRC ranks the
positive-class probability of slide answers (average precision; seed 000, "Diagnostic-result normalization
and metric computation")."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from copilot.bench.measures.configs import config_of, label


def cohen_kappa(a: list[str], b: list[str]) -> float | None:
    """κ = (p_o − p_e) / (1 − p_e) for two raters of the same items; None when undefined (p_e = 1)."""
    if not a or len(a) != len(b):
        return None
    n = len(a)
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in ca) / (n * n)
    return None if pe >= 1.0 else (po - pe) / (1.0 - pe)


def fleiss_kappa(items: list[list[str]]) -> float | None:
    """Fleiss' κ over items rated by the same number n ≥ 2 of raters; None when undefined."""
    if not items or len({len(r) for r in items}) != 1 or len(items[0]) < 2:
        return None
    n, big_n = len(items[0]), len(items)
    per = [(sum(c * c for c in Counter(r).values()) - n) / (n * (n - 1)) for r in items]
    totals = Counter(v for r in items for v in r)
    pe = sum((c / (big_n * n)) ** 2 for c in totals.values())
    p_bar = sum(per) / big_n
    return None if pe >= 1.0 else (p_bar - pe) / (1.0 - pe)


def krippendorff_alpha(units: list[list[str]]) -> float | None:
    """Nominal α = 1 − D_o / D_e from the coincidence matrix; units with fewer than two values are left out."""
    pairable = [u for u in units if len(u) >= 2]
    coincidence: dict[tuple[str, str], float] = defaultdict(float)
    for u in pairable:
        for i, x in enumerate(u):
            for j, y in enumerate(u):
                if i != j:
                    coincidence[(x, y)] += 1.0 / (len(u) - 1)
    n_c: dict[str, float] = defaultdict(float)
    for (x, _), w in coincidence.items():
        n_c[x] += w
    n = sum(n_c.values())
    if n <= 1:
        return None
    d_o = sum(w for (x, y), w in coincidence.items() if x != y) / n
    d_e = sum(n_c[x] * n_c[y] for x in n_c for y in n_c if x != y) / (n * (n - 1))
    return None if d_e == 0 else 1.0 - d_o / d_e


def auprc(scores: list[float], positive: list[bool]) -> float | None:
    """Average precision: the mean, over the positives, of the precision at each positive's rank (scores
    descending, ties in input order); None without a positive."""
    if not any(positive):
        return None
    ranked = sorted(zip(scores, positive, strict=True), key=lambda sp: -sp[0])
    hits, total = 0, 0.0
    for k, (_, pos) in enumerate(ranked, 1):
        if pos:
            hits += 1
            total += hits / k
    return total / sum(positive)


def _answer(row: dict[str, Any]) -> str:
    fields = (row.get("details") or {}).get("fields", {})
    return "|".join(f"{k}={v.get('given')}" for k, v in sorted(fields.items())) or str(row.get("response", ""))


def repeat_agreement(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per run configuration and module with repeated cases: Cohen's κ (first two repeats), Fleiss' κ (cases
    with the full repeat count) and Krippendorff's α (all) of the answers across repeats."""
    groups: dict[tuple[str, str], dict[str, dict[int, str]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        if r.get("status") != "error":
            groups[(label(config_of(r)), r["module"])][r["case_id"]][int(r.get("repeat", 0))] = _answer(r)
    out: dict[str, dict[str, Any]] = {}
    for (cfg, module), cases in sorted(groups.items()):
        k = max(len(v) for v in cases.values())
        if k < 2:
            continue
        units = [[v[rep] for rep in sorted(v)] for v in cases.values()]
        two = [u for u in units if len(u) >= 2]
        out[f"{cfg} / {module}"] = {
            "repeats": k,
            "cases": len(units),
            "cohen_kappa": cohen_kappa([u[0] for u in two], [u[1] for u in two]),
            "fleiss_kappa": fleiss_kappa([u for u in units if len(u) == k]),
            "krippendorff_alpha": krippendorff_alpha(units),
        }
    return out
