"""Run configurations: what an aggregate of the process report is keyed by, and how pairs are formed.

A configuration is (model, provider, protocol, track, budget, ops, backend, rules); repeats, seeds, cases and
modules of one configuration are pooled, and the report says so. Two configurations are compared only when
they differ in the one factor under comparison (the protocol for the native-vs-harness funnel), and their
episodes are paired by (case, repeat, seed) — Algorithm 1 pairs the same task at the same budget.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from copilot.llm import spec as model_spec

OFFLINE_PROVIDER = "offline"
FIELDS = ("model", "provider", "protocol", "track", "budget", "ops", "backend", "rules")
POOLED = ("cases", "modules", "repeats", "seeds")


class Config(NamedTuple):
    """One run configuration; every process aggregate is computed within one."""

    model: str
    provider: str
    protocol: str
    track: str
    budget: int
    ops: str
    backend: str
    rules: str


def provider_of(policy: str) -> str:
    """The model provider a policy spec names by its prefix (`anthropic:claude-x` → `anthropic`); offline
    policies (baseline, prior, scripted, answer files) → `offline`."""
    provider = model_spec.provider_of(policy)
    return provider.name if provider is not None else OFFLINE_PROVIDER


def config_of(row: dict[str, Any]) -> Config:
    """A result row's configuration (defaults where an older row lacks a column)."""
    return Config(
        str(row.get("model") or row.get("policy") or ""),
        provider_of(str(row.get("policy") or "")),
        str(row.get("protocol") or "harness"),
        str(row.get("track") or ""),
        int(row.get("budget") or 0),
        str(row.get("ops") or ""),
        str(row.get("backend") or "embedded"),
        str(row.get("rules") or ""),
    )


def label(cfg: Config) -> str:
    """`model · provider · protocol · Track T · budget B[ · ops][ · backend][ · rules]` (defaults left out)."""
    parts = [cfg.model, cfg.provider, cfg.protocol, f"Track {cfg.track}", f"budget {cfg.budget}"]
    parts += [f"ops {cfg.ops}"] if cfg.ops else []
    parts += [cfg.backend] if cfg.backend != "embedded" else []
    parts += [f"rules {cfg.rules}"] if cfg.rules else []
    return " · ".join(parts)


def by_config(rows: list[dict[str, Any]]) -> dict[Config, list[dict[str, Any]]]:
    """Rows grouped by configuration, in a stable order."""
    groups: dict[Config, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[config_of(r)].append(r)
    return dict(sorted(groups.items()))


def pooled(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many cases, modules, repeats and seeds one configuration's aggregate pools."""
    return {
        "episodes": len(rows),
        "cases": len({r["case_id"] for r in rows}),
        "modules": len({r["module"] for r in rows}),
        "repeats": len({r.get("repeat", 0) for r in rows}),
        "seeds": len({r.get("seed", 0) for r in rows}),
    }


def paired(
    rows: list[dict[str, Any]], factor: str, a: Any, b: Any
) -> dict[Config, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """Episode pairs (row with factor = a, row with factor = b) per configuration of the `a` side, within
    configurations equal in every other field, matched by (case, repeat, seed); unmatched episodes drop out."""
    if factor not in FIELDS:
        raise ValueError(f"unknown configuration field {factor!r}; one of {', '.join(FIELDS)}")
    index = {(config_of(r), r["case_id"], r.get("repeat", 0), r.get("seed", 0)): r for r in rows}
    out: dict[Config, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for (cfg, case, repeat, seed), ra in sorted(index.items(), key=lambda kv: (kv[0][0], *map(str, kv[0][1:]))):
        if getattr(cfg, factor) != a:
            continue
        rb = index.get((cfg._replace(**{factor: b}), case, repeat, seed))
        if rb is not None:
            out[cfg].append((ra, rb))
    return dict(out)


def pooling_note(groups: dict[Config, list[dict[str, Any]]]) -> str:
    """One sentence for a report: what each aggregate keys on and what it pools."""
    if not groups:
        return ""
    totals = [pooled(g) for g in groups.values()]
    most = {k: max(t[k] for t in totals) for k in POOLED}
    pooled_over = ", ".join(f"up to {most[k]} {k}" for k in POOLED if most[k] > 1) or "one episode each"
    return (
        f"Each row is one run configuration ({', '.join(FIELDS)}); nothing is pooled across configurations. "
        f"Within a row: {pooled_over}."
    )
