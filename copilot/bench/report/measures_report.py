"""The process measures of a run, from its result rows alone: the JSON of `bench report --format json` (per
episode and per model) and the compact HTML section of report.html."""

from __future__ import annotations

import html
from collections import Counter, defaultdict
from typing import Any

from copilot.bench.measures import configs as C
from copilot.bench.measures import dimensions as D
from copilot.bench.measures import workflow_audit as W
from copilot.bench.measures.agreement import repeat_agreement
from copilot.bench.measures.exploration import hit_rates
from copilot.bench.measures.failures import NAMES
from copilot.bench.measures.perturb import fault_statistics, statistics_html
from copilot.bench.measures.reflection import reflection_html, reflection_summary
from copilot.bench.scoring.stats import mean

FAILURE_CODES = tuple(NAMES)


def _model(r: dict[str, Any]) -> str:
    return str(r.get("model") or r["policy"])



def episode_json(r: dict[str, Any]) -> dict[str, Any]:
    """One episode's measures as the JSON report carries them."""
    p = r.get("process") or {}
    dims = p.get("dimensions") or {}
    return {
        "case_id": r["case_id"],
        "module": r["module"],
        "model": _model(r),
        "policy": r["policy"],
        "protocol": r.get("protocol"),
        "track": r["track"],
        "budget": r.get("budget"),
        "repeat": r.get("repeat", 0),
        "trace_dir": r.get("trace_dir"),
        "task": r["task"],
        "strict": r["strict"],
        "loc": r["loc"],
        "stages": [s["stage"] for s in p.get("stages", [])],
        "stage_path": p.get("stage_path", []),
        "failures": p.get("failures", []),
        "checkpoints": p.get("checkpoints"),
        "claim_violations": p.get("claims", []),
        "cwas3": p.get("cwas3"),
        "r6": p.get("r6"),
        "dimensions": {d: (dims.get(d) or {}).get("score") for d in D.DIMENSIONS},
        "dimension_support": {d: (dims.get(d) or {}).get("support", 0) for d in D.DIMENSIONS},
        "interventions": p.get("interventions", []),
        "hierarchical_hits": p.get("hierarchical_hits"),
        "reflection": p.get("reflection"),
        "confidence": p.get("confidence"),
        "usage": {**(p.get("usage") or {}), "duration_s": r.get("duration_s")},
    }


def milestone_rates(group: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Share of the Track B episodes run with the registration operations (ops all or registration) reaching
    each milestone of the paper's Fig. 7 in order; None when there are none."""
    eligible = [r for r in group if r.get("track") == "B" and r.get("ops") in ("", None, "all", "registration")]
    reached = [(r.get("process") or {}).get("milestones") or [] for r in eligible]
    if not eligible:
        return None
    return {"episodes": len(eligible), **{m: sum(m in x for x in reached) / len(eligible) for m in D.MILESTONES}}


def model_json(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per run configuration (`configs.label`): failure counts (overall and per module), S and the pass sweep,
    CWAS-3, R6 and its flags, the seven dimensions with support, Pass@3, and token, time and cost totals; each
    entry names its configuration and what it pools."""
    groups = {C.label(cfg): group for cfg, group in C.by_config(rows).items()}
    configs = {C.label(cfg): cfg for cfg in C.by_config(rows)}
    dims = D.dimension_summary(rows)
    pass3 = D.pass3_by_model(rows)
    out: dict[str, Any] = {}
    for model, group in sorted(groups.items()):
        procs = [r.get("process") or {} for r in group]
        failures = Counter(f["code"] for p in procs for f in p.get("failures", []))
        by_module: dict[str, Counter[str]] = defaultdict(Counter)
        for r, p in zip(group, procs, strict=True):
            by_module[r["module"]].update(f["code"] for f in p.get("failures", []))
        scores = [(p.get("checkpoints") or {}).get("S") for p in procs]
        flags: dict[str, Counter[str]] = defaultdict(Counter)
        for p in procs:
            for k, v in ((p.get("r6") or {}).get("flags") or {}).items():
                flags[k][v] += 1
        usage = [p.get("usage") or {} for p in procs]
        out[model] = {
            "config": configs[model]._asdict(),
            "pooled": C.pooled(group),
            "episodes": len(group),
            "failures": {c: failures.get(c, 0) for c in FAILURE_CODES},
            "episodes_with_failure": sum(1 for p in procs if p.get("failures")),
            "failures_by_module": {m: {c: n.get(c, 0) for c in FAILURE_CODES} for m, n in sorted(by_module.items())},
            "checkpoint_S": mean([s for s in scores if s is not None]),
            "formal_passes": W.pass_sweep(scores),
            "cwas3": mean([p["cwas3"]["score"] for p in procs if p.get("cwas3")]),
            "r6": mean([p["r6"]["score"] for p in procs if p.get("r6")]),
            "r6_flags": {k: dict(v) for k, v in sorted(flags.items())},
            "claim_violations": sum(len(p.get("claims", [])) for p in procs),
            "dimensions": dims.get(model, {}),
            "pass@3": pass3.get(model),
            "milestones": milestone_rates(group),
            "usage": {
                "prompt_tokens": sum(int(u.get("prompt_tokens", 0)) for u in usage),
                "completion_tokens": sum(int(u.get("completion_tokens", 0)) for u in usage),
                "cost_usd": known_sum([u.get("cost_usd", 0.0) for u in usage]),
                "model_latency_s": round(sum(float(u.get("model_latency_s", 0.0)) for u in usage), 3),
                "wall_s": round(sum(float(r.get("duration_s") or 0.0) for r in group), 3),
            },
        }
    return out


def known_sum(costs: list[Any]) -> float | None:
    """The total of costs, or None when one is unknown (a model without a price: shown as tokens only)."""
    return None if any(c is None for c in costs) else round(sum(float(c) for c in costs), 6)


def _cost(value: float | None) -> str:
    return "tokens only" if value is None else f"{value:.4f}"


def protocol_funnels(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Native-vs-harness funnel per harness configuration that also ran with the `paper` protocol (every other
    configuration field equal), its episodes paired by (case, repeat, seed)."""
    pairs = C.paired(rows, "protocol", "harness", "paper")
    if not pairs:
        return None
    return {C.label(cfg._replace(protocol="harness vs paper")): D.funnel_pairs(ps) for cfg, ps in pairs.items()}


def perturbations(rows: list[dict[str, Any]], perturbed: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """Sensitivity, selectivity and fault localisation of the perturbed episodes (`bench perturb`'s, else rows that
    carry a fault by hand) against the clean ones; None without any."""
    perturbed = perturbed or [r for r in rows if r.get("perturbation")]
    if not perturbed:
        return None
    return fault_statistics([r for r in rows if not r.get("perturbation")], perturbed)


def measures_json(rows: list[dict[str, Any]], perturbed: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The whole process-measure report of a run (`perturbed`: the episodes `bench perturb` wrote)."""
    return {
        "pooling": C.pooling_note(C.by_config(rows)),
        "episodes": [episode_json(r) for r in rows],
        "models": model_json(rows),
        "diagnostic_results": W.diagnostic_results(rows),
        "repeat_agreement": repeat_agreement(rows),
        "reflection": reflection_summary(rows),
        "exploration": hit_rates(rows),
        "native_vs_harness": protocol_funnels(rows),
        "perturbations": perturbations(rows, perturbed),
    }


def _f(v: Any) -> str:
    return '<span class="muted">—</span>' if v is None else f"{v:.2f}" if isinstance(v, float) else html.escape(str(v))


def _ci(funnel: dict[str, Any]) -> str:
    ci = funnel.get("delta_strict_ci")
    return "" if ci is None else f' <span class="muted">[{ci[0]:+.2f}, {ci[1]:+.2f}]</span>'


def measures_html(rows: list[dict[str, Any]], perturbed: list[dict[str, Any]] | None = None) -> str:
    """The compact section of report.html: per model failures, S, CWAS-3, R6, the seven dimensions (n),
    Pass@3 and usage; the native-vs-harness funnel (exploration hits: the report's coverage table)."""
    data = measures_json(rows, perturbed)
    head = (["Configuration", "n"] + list(FAILURE_CODES) + ["S", "pass ≥0.70/0.75/0.80", "CWAS-3", "R6"]
            + [f'<span title="{D.TITLES[d]}">{d}</span>' for d in D.DIMENSIONS]
            + ["Pass@3", "tokens in/out", "cost $", "wall s"])  # fmt: skip
    body = []
    for model, m in data["models"].items():
        sweep = "/".join(str(v) for v in m["formal_passes"].values())
        dims = "".join(
            f'<td title="n={m["dimensions"][d]["n"]}">{_f(m["dimensions"][d]["mean"])}'
            f'<span class="muted"> ({m["dimensions"][d]["n"]})</span></td>'
            for d in D.DIMENSIONS
        )
        u = m["usage"]
        body.append(
            f'<tr><td class="l">{html.escape(model)}</td><td>{m["episodes"]}</td>'
            + "".join(f"<td>{m['failures'][c]}</td>" for c in FAILURE_CODES)
            + f"<td>{_f(m['checkpoint_S'])}</td><td>{sweep}</td><td>{_f(m['cwas3'])}</td><td>{_f(m['r6'])}</td>"
            + dims
            + f"<td>{_f(m['pass@3'])}</td><td>{u['prompt_tokens']}/{u['completion_tokens']}</td>"
            f"<td>{_cost(u['cost_usd'])}</td><td>{u['wall_s']:.1f}</td></tr>"
        )
    parts = [
        '<h2 id="process-measures">Process measures: failures, checkpoints, alignment, dimensions</h2>',
        '<p class="caption">F1 objective drift, F2 pseudo-quantification, F3 state misbinding, F4 discarded '
        "correct candidate, F5 unobserved evidence (episodes labelled). S: checkpoint completion (ACP-Bench); "
        "CWAS-3 and R6 as ACP-Bench defines them; MedHarnessBench's seven dimensions by their equations (the "
        "report's one seven-dimension table): "
        + "; ".join(f"{d} {t}" for d, t in D.TITLES.items())
        + ", each the mean over the episodes where it is defined (support in brackets). Definitions: "
        "docs/metrics.md. "
        + html.escape(data["pooling"]) + "</p>",
        '<table class="measures"><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(body) + "</table>",
    ]
    per_module = [
        (model, module, counts)
        for model, m in data["models"].items()
        for module, counts in m["failures_by_module"].items()
        if any(counts.values())
    ]
    if per_module:
        parts.append(
            '<h3>Failure labels per configuration and module</h3><table class="failures-by-module"><tr>'
            "<th>Configuration</th><th>Module</th>" + "".join(f"<th>{c}</th>" for c in FAILURE_CODES) + "</tr>"
            + "".join(
                f'<tr><td class="l">{html.escape(model)}</td><td class="l">{html.escape(module)}</td>'
                + "".join(f"<td>{counts[c]}</td>" for c in FAILURE_CODES) + "</tr>"
                for model, module, counts in per_module
            )
            + "</table>"
        )  # fmt: skip
    if data["native_vs_harness"]:
        head_f = "".join(f"<th>{html.escape(s)}</th>" for s in D.FUNNEL)
        frows = "".join(
            f'<tr><td class="l">{html.escape(model)}</td>' + "".join(f"<td>{c}</td>" for c in f["counts"])
            + f"<td>{f['pairs']}</td><td>{_f(f['p_behaviour'])}</td><td>{_f(f['delta_strict'])}{_ci(f)}"
            + f" p {_f(f.get('delta_strict_p'))}</td></tr>"
            for model, f in data["native_vs_harness"].items()
        )  # fmt: skip
        parts.append(
            '<h3>Native (paper) vs harness: intervention funnel</h3><table class="funnel"><tr><th>Configuration</th>'
            f"{head_f}<th>pairs</th><th>Pr[reached z5]</th><th>Δ Strict</th></tr>{frows}</table>"
        )
    if data["repeat_agreement"]:
        arows = "".join(
            f'<tr><td class="l">{html.escape(key)}</td><td>{a["repeats"]}</td><td>{a["cases"]}</td>'
            f"<td>{_f(a['cohen_kappa'])}</td><td>{_f(a['fleiss_kappa'])}</td><td>{_f(a['krippendorff_alpha'])}</td></tr>"
            for key, a in data["repeat_agreement"].items()
        )
        parts.append(
            '<h3>Answer agreement over repeats (ACP-Bench)</h3><table class="agreement"><tr><th>Configuration / '
            "module</th><th>repeats</th><th>cases</th><th>Cohen κ</th><th>Fleiss κ</th><th>Krippendorff α</th>"
            f"</tr>{arows}</table>"
        )
    parts.append(reflection_html(data["reflection"]))
    if perturbed:
        parts.append(statistics_html(data["perturbations"]))
    return "".join(parts)


def failures_html(process: dict[str, Any]) -> str:
    """The episode page's section: failure labels with links to their supporting calls, stages, S, CWAS-3, R6."""
    if "failures" not in process:
        return ""
    labels = process.get("failures") or []
    if labels:
        items = "".join(
            f'<tr class="bad"><td>{html.escape(f["code"])}</td><td>{html.escape(f["name"])}</td>'
            f"<td>{html.escape(f['detail'])}</td><td>"
            + " ".join(f'<a href="#call-{s}">{s}</a>' for s in f["events"])
            + "</td></tr>"
            for f in labels
        )
        table = (
            f"<table class=failures><tr><th>label</th><th>failure</th><th>why</th><th>events</th></tr>{items}</table>"
        )
    else:
        table = '<p class="ok">No failure label.</p>'
    cp = process.get("checkpoints") or {}
    statuses = " ".join(f"{c['id']} {'N/A' if c['status'] == 'NA' else c['status']}" for c in cp.get("items", []))
    claims = "; ".join(f"{c['boundary']}: {c['claim']}" for c in process.get("claims", [])) or "none"
    summary = (
        f"<p>Stages: {html.escape(' → '.join(process.get('stage_path', [])))}. Checkpoints: {html.escape(statuses)}; "
        f"S = {_f(cp.get('S'))}. CWAS-3 {_f((process.get('cwas3') or {}).get('score'))}, "
        f"R6 {_f((process.get('r6') or {}).get('score'))}. Claim-boundary violations: {html.escape(claims)}.</p>"
    )
    return "<h2>Failure labels</h2>" + table + summary
