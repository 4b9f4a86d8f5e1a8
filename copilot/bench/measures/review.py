"""Reviewers' reliability as ACP-Bench (seed 000, Methods, "reliability review") computes it: a ledger of
checkpoint items (one per episode and checkpoint, with the evidence it rests on) that reviewers fill in with
PASS, PARTIAL, FAIL, NA or SKIP, then all-reviewer exact agreement, pairwise weighted Cohen κ (linear weights)
and the primary three-rater interval Krippendorff α over the ordinal core FAIL = 0, PARTIAL = 0.5, PASS = 1
(NA and SKIP left out), with nominal α over all five statuses as the sensitivity analysis."""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from typing import Any

from copilot.bench.measures.agreement import krippendorff_alpha
from copilot.bench.measures.configs import config_of, label

STATUSES = ("PASS", "PARTIAL", "FAIL", "NA", "SKIP")
ORDINAL = {"FAIL": 0.0, "PARTIAL": 0.5, "PASS": 1.0}
CAPTURES = frozenset({"record_point", "record_key_slice", "record_view_evidence", "bookmark_view",
                      "measure_distance", "capture_viewer"})  # fmt: skip


def weighted_kappa(a: list[float], b: list[float], categories: tuple[float, ...] = (0.0, 0.5, 1.0)) -> float | None:
    """Cohen's κ with linear disagreement weights w_ij = |c_i − c_j| / (max − min):
    κ_w = 1 − Σ w_ij o_ij / Σ w_ij e_ij (o observed, e expected from the marginals); None when undefined."""
    if not a or len(a) != len(b):
        return None
    n, span = len(a), max(categories) - min(categories)
    pairs = Counter(zip(a, b, strict=True))
    ma, mb = Counter(a), Counter(b)
    observed = sum(abs(x - y) / span * c for (x, y), c in pairs.items()) / n
    expected = sum(abs(x - y) / span * ma[x] * mb[y] for x in categories for y in categories) / (n * n)
    return None if expected == 0 else 1.0 - observed / expected


def interval_alpha(units: list[list[float]]) -> float | None:
    """Krippendorff's α with the interval metric δ² = (c − k)²: α = 1 − D_o / D_e, D_o the mean squared difference
    of the values paired within a unit (each unit weighted 1 / (m_u − 1)), D_e over all pairable values;
    units with fewer than two values are left out; None when undefined."""
    pairable = [u for u in units if len(u) >= 2]
    values = [v for u in pairable for v in u]
    n = len(values)
    if n <= 1:
        return None
    d_o = sum(sum((x - y) ** 2 for i, x in enumerate(u) for j, y in enumerate(u) if i != j) / (len(u) - 1)
              for u in pairable) / n  # fmt: skip
    d_e = sum((x - y) ** 2 for i, x in enumerate(values) for j, y in enumerate(values) if i != j) / (n * (n - 1))
    return None if d_e == 0 else 1.0 - d_o / d_e


# ----- the ledger -----


def _evidence(rule_id: str, calls: list[dict[str, Any]], response: str) -> dict[str, Any]:
    """The trace events a checkpoint rests on (by its id's family), and the answer where it judges the answer."""
    def brief(e: dict[str, Any]) -> dict[str, Any]:
        return {"seq": e.get("seq"), "handler": e.get("handler"), "ok": bool(e.get("ok")),
                "error": (e.get("error") or {}).get("code")}  # fmt: skip

    if rule_id == "P1":
        chosen = calls[:1]
    elif rule_id == "A3":
        chosen = [e for e in calls if e.get("handler") in CAPTURES]
    elif rule_id == "A4":
        chosen = [e for n, e in enumerate(calls)
                  if not e.get("ok") or any(not c.get("ok") and c.get("handler") == e.get("handler")
                                            for c in calls[:n])]  # fmt: skip
    elif rule_id in ("D1", "D2", "D3"):
        chosen = []
    elif rule_id in ("A2", "A5", "A6", "R1"):
        chosen = [e for e in calls if e.get("images") or e.get("ok")]
    else:
        chosen = calls
    out: dict[str, Any] = {"calls": [brief(e) for e in chosen]}
    if rule_id.startswith("D") or rule_id == "A3":
        out["answer"] = response
    return out


def review_ledger(rows: list[dict[str, Any]], events_of: Any) -> list[dict[str, Any]]:
    """One ledger item per (episode, checkpoint) of the rows that carry checkpoints: the item's id, title and
    weight, the episode's configuration and case, and the evidence (`events_of(row)`: its trace events, or None).
    The deterministic status is left out (reviewers judge blind); `status` is for the reviewer to fill."""
    out = []
    for r in rows:
        items = ((r.get("process") or {}).get("checkpoints") or {}).get("items") or []
        events = events_of(r) or []
        calls = [e for e in events if e.get("type") == "handler_call" and e.get("actor") == "agent"]
        for c in items:
            out.append({
                "item": f"{r.get('trace_dir') or r['case_id']}#{c['id']}", "episode": r.get("trace_dir"),
                "configuration": label(config_of(r)), "case_id": r["case_id"], "module": r["module"],
                "checkpoint": c["id"], "title": c["title"], "critical": c["critical"],
                "evidence": _evidence(c["id"], calls, str(r.get("response") or "")),
                "status": None, "confidence": None, "rationale": "",
            })  # fmt: skip
    return out


def read_review(lines: list[str], source: str) -> dict[str, str]:
    """A reviewer's returned ledger (JSON lines with `item` and `status`) → item → status; a line without a
    known status or item is a ValueError naming the file and line (nothing is imported from a bad file)."""
    import json

    out: dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            item, status = str(row["item"]), row["status"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{source}:{n}: expected a JSON object with item and status ({exc})") from None
        if status is None:
            continue  # not judged
        if str(status).upper() not in STATUSES:
            raise ValueError(f"{source}:{n}: status {status!r} is not one of {', '.join(STATUSES)}")
        out[item] = str(status).upper()
    return out


def reliability(reviews: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Over the items judged by at least two reviewers: all-reviewer exact agreement (five statuses), pairwise
    weighted κ (ordinal core), interval α (primary; ordinal core, NA and SKIP missing) and nominal α."""
    names = sorted(reviews)
    items = sorted({i for r in reviews.values() for i in r})
    judged = {i: [reviews[n][i] for n in names if i in reviews[n]] for i in items}
    covered = {i: v for i, v in judged.items() if len(v) >= 2}
    full = [v for v in covered.values() if len(v) == len(names)]
    pairs = {}
    for x, y in combinations(names, 2):
        common = [i for i in items if reviews[x].get(i) in ORDINAL and reviews[y].get(i) in ORDINAL]
        a = [ORDINAL[reviews[x][i]] for i in common]
        b = [ORDINAL[reviews[y][i]] for i in common]
        pairs[f"{x} / {y}"] = {"items": len(common), "weighted_kappa": weighted_kappa(a, b)}
    return {
        "reviewers": names,
        "items": len(items),
        "covered": len(covered),
        "exact_agreement": sum(len(set(v)) == 1 for v in full) / len(full) if full else None,
        "weighted_kappa": pairs,
        "interval_alpha": interval_alpha([[ORDINAL[s] for s in v if s in ORDINAL] for v in covered.values()]),
        "nominal_alpha": krippendorff_alpha(list(covered.values())),
    }
