"""`episode.html`: one audit page per episode, written next to its trace.

It shows the prompt, each model turn, each handler call (arguments, result, warnings, the images the model
saw), the final answer against the truth with every evidence check, the process metrics, and the evidence
drawn on the case: key-slice planes and the RAS point on the three views (with the hidden lesion outline),
or the WSI points, ground-truth ROIs and the fields shown at each magnification on the slide overview
(drawn by `evidence_figures`).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from copilot.bench.measures.trace_views import recorded_events
from copilot.bench.report.evidence_figures import EVIDENCE_DRAWINGS
from copilot.bench.scoring.scorers import Truth
from copilot.cases.pack import CasePack, load_case
from copilot.pacs.store import stored_html

PAGE = "episode.html"
CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:8px 0}
th,td{border:1px solid #bbb;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eee} .ok{background:#dff5df} .bad{background:#fbdcdc} .na{color:#888}
pre{white-space:pre-wrap;background:#f6f6f6;padding:8px;margin:4px 0;max-height:320px;overflow:auto;font-size:12px}
.call{border-left:4px solid #4a78c2;padding:4px 10px;margin:10px 0} .turn{border-left:4px solid #999;padding:4px 10px}
.err{border-left-color:#c33} .warn{background:#fff2cc;padding:4px 8px;margin:4px 0;border:1px solid #e0b000}
.shots img{max-width:256px;margin:2px;border:1px solid #ccc} figure{display:inline-block;margin:6px}
figcaption{font-size:12px;color:#555} .legend span{display:inline-block;margin-right:14px;font-size:12px}
"""
# what a desktop or chat session adds to an episode's events
SESSION_EVENTS = (
    "clinician_instruction", "clinician_approval", "clinician_rejection", "clinician_stop", "answer_evidence",
    "final_answer", "agent_error", "model_disclosure", "clinician_question", "clinician_decision",
)  # fmt: skip


def _json(value: Any, limit: int = 4000) -> str:
    text = json.dumps(value, indent=1, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"


def _cls(ok: bool | None) -> str:
    return "na" if ok is None else "ok" if ok else "bad"


def _axis_strip(axis: str, shown: list[float], extent: list[float] | None, cited: float | None) -> str:
    """SVG strip: the offsets shown on an axis (ticks) against the lesion's extent (band) and the cited slice."""
    values = list(shown) + (list(extent) if extent else []) + ([cited] if cited is not None else [])
    if not values:
        return ""
    lo, hi = min(values) - 5, max(values) + 5
    w = 420

    def x(v: float) -> float:
        return 10 + (w - 20) * (v - lo) / (hi - lo)

    parts = [f'<line x1="10" y1="20" x2="{w - 10}" y2="20" stroke="#999"/>']
    if extent:
        parts.append(
            f'<rect x="{x(extent[0]):.1f}" y="12" width="{x(extent[1]) - x(extent[0]):.1f}" height="16" '
            'fill="#2c2" fill-opacity="0.35"><title>lesion extent</title></rect>'
        )
    parts += [f'<line x1="{x(v):.1f}" y1="10" x2="{x(v):.1f}" y2="30" stroke="#4a78c2"/>' for v in shown]
    if cited is not None:
        parts.append(f'<circle cx="{x(cited):.1f}" cy="20" r="4" fill="#e22"><title>cited {cited}</title></circle>')
    return (
        f'<svg class="coverage-axis" width="{w}" height="44"><text x="10" y="42" font-size="11">{axis}: '
        f"{lo + 5:.0f} … {hi - 5:.0f} mm, {len(shown)} offsets shown</text>{''.join(parts)}</svg>"
    )


# ----- the page -----


def _evidence_rows(details: dict[str, Any]) -> str:
    rows = []
    for c in details.get("evidence", []):
        what = {k: v for k, v in c.items() if k not in ("kind", "ok")}
        rows.append(
            f'<tr class="{_cls(c.get("ok"))}"><td>{html.escape(c["kind"])}</td>'
            f"<td>{html.escape(json.dumps(what, ensure_ascii=False))}</td>"
            f"<td>{'—' if c.get('ok') is None else 'pass' if c['ok'] else 'fail'}</td></tr>"
        )
    if not rows:
        return "<p class=na>No evidence to check for this case.</p>"
    return "<table class=evidence><tr><th>check</th><th>detail</th><th>result</th></tr>" + "".join(rows) + "</table>"


def _field_rows(details: dict[str, Any]) -> str:
    rows = [
        f'<tr class="{_cls(f.get("correct"))}"><td>{html.escape(k)}</td><td>{html.escape(str(f.get("given")))}</td>'
        f"<td>{html.escape(str(f.get('truth')))}</td></tr>"
        for k, f in details.get("fields", {}).items()
    ]
    return "<table class=fields><tr><th>field</th><th>answer</th><th>truth</th></tr>" + "".join(rows) + "</table>"


def timeline_html(events: list[dict[str, Any]]) -> str:
    parts = []
    for e in events:
        kind = e.get("type")
        if kind == "model_turn":
            calls = "".join(
                f"<li><code>{html.escape(c['name'])}</code> {html.escape(str(c['arguments']))}</li>"
                for c in e.get("tool_calls", [])
            )
            parts.append(
                f'<div class="turn"><b>Model turn {e.get("round")}</b>'
                f"<pre>{html.escape(str(e.get('content') or ''))}</pre>"
                f"<ul>{calls}</ul></div>"
            )
        elif kind == "handler_call":
            ok = e.get("ok")
            warns = "".join(
                f'<div class="warn">⚠ {html.escape(w.get("code", ""))}: {html.escape(w.get("message", ""))}</div>'
                for w in (e.get("result") or {}).get("warnings", [])
            )
            shots = "".join(
                f'<figure><img src="{html.escape(im["artifact"])}" alt="{html.escape(im.get("view", ""))}">'
                f"<figcaption>{html.escape(im.get('view', ''))} {html.escape(im.get('label', ''))}</figcaption>"
                "</figure>"
                for im in e.get("images", [])
                if im.get("artifact")
            )
            body = _json(e.get("result")) if ok else _json(e.get("error"))
            parts.append(
                f'<div class="call{"" if ok else " err"}" id="call-{e["seq"]}">'
                f"<b>#{e['seq']} {html.escape(e['handler'])}</b> "
                f"({html.escape(str(e.get('actor')))}, {e.get('status')}, {e.get('duration_ms')} ms)"
                f"<pre>args: {html.escape(_json(e.get('args'), 1500))}</pre>{warns}<pre>{html.escape(body)}</pre>"
                f'<div class="shots">{shots}</div></div>'
            )
        elif kind in ("agent_start", "model_retry", "score", *SESSION_EVENTS):
            payload = {k: v for k, v in e.items() if k not in ("prev", "hash", "seq", "type", "time")}
            parts.append(
                f"<div class=turn><b>{html.escape(kind)}</b> <code>{html.escape(json.dumps(payload))}</code></div>"
            )
    return "".join(parts)


def render_episode(
    trace_dir: Path,
    row: dict[str, Any],
    events: list[dict[str, Any]],
    case: CasePack | None,
    prompt: tuple[str, ...] | None = None,
) -> str:
    """The audit page of one episode (`prompt`: the system and task text the model was given, when known)."""
    details, process = row.get("details") or {}, row.get("process") or {}
    coverage = process.get("coverage") or {}
    loc = "—" if row["loc"] is None else f"{row['loc']:.2f}"
    title = (
        f"{row['case_id']} · {row['model']} · track {row['track']} · {row.get('protocol', 'harness')} protocol · "
        f"budget {row['budget']} · repeat {row['repeat']}"
    )
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head>",
        f'<body><p><a href="{html.escape(_back_link(trace_dir, row))}">← report</a></p><h1>{html.escape(title)}</h1>',
        f"<p>Module {row['module']}; status {row['status']}; {row['rounds']} rounds; Task {row['task']:.2f}, "
        f"Strict {row['strict']:.2f}, Loc {loc}"
        f"{'; parse error: ' + html.escape(row['parse_error']) if row.get('parse_error') else ''}. "
        f'<a href="trace.jsonl">trace.jsonl</a></p>',
        _gallery_link(trace_dir, row),
    ]
    parts.append(_model_line(events, process.get("usage") or {}))
    if prompt is None:
        task = next((e for e in events if e.get("type") == "task_prompt"), None)
        prompt = (task["system"], task["user"]) if task else None
    if prompt is not None:
        parts.append("<h2>Prompt</h2>" + "".join(f"<pre>{html.escape(text)}</pre>" for text in prompt))
    parts.append(f"<h2>Final answer against the truth</h2><pre>{html.escape(row['response'])}</pre>")
    parts.append(_field_rows(details) + "<h3>Evidence checks</h3>" + _evidence_rows(details))
    from copilot.bench.report.measures_report import failures_html

    parts.append(failures_html(process))
    parts.append("<h2>Evidence drawn on the case</h2>")
    if case is not None:
        truth = Truth(case)
        try:
            draw = EVIDENCE_DRAWINGS.get(case.kind)
            if draw is None:
                parts.append("<p class=na>No evidence drawing for this viewer kind.</p>")
            else:
                parts.append(draw(case, truth, details.get("answer") or {}, coverage))
        except Exception as exc:  # a moved or unreadable case: the rest of the page still stands
            parts.append(f"<p class=na>Cannot draw the evidence: {html.escape(f'{type(exc).__name__}: {exc}')}</p>")
    else:
        parts.append("<p class=na>The case pack is not readable from here.</p>")
    parts.append("<h2>Exploration coverage</h2>" + _coverage_html(coverage, details))
    parts.append("<h2>Process metrics</h2>" + _process_html(process))
    parts.append(stored_html(trace_dir / "derived"))  # what the episode stored on the study's PACS, linked
    parts.append("<h2>Episode</h2>" + timeline_html(events) + "</body></html>")
    return "".join(parts)


def _coverage_html(coverage: dict[str, Any], details: dict[str, Any]) -> str:
    if "shown" in coverage:  # planes shown through volumes
        cited = (details.get("answer") or {}).get("key_slices") or {}
        extent = coverage.get("extent") or {}
        seen = coverage.get("lesion_seen")
        first = ""
        if coverage.get("first_seen_call"):
            first = f", first at call {coverage['first_seen_call']} (event #{coverage['first_seen_seq']})"
        shown = "—" if seen is None else "yes" if seen else "no"
        head = f"<p>Lesion shown: {shown}{first}; {coverage.get('planes', 0)} planes shown.</p>"
        return head + "".join(
            f"<div>{_axis_strip(a, coverage.get('shown', {}).get(a, []), extent.get(a), cited.get(a))}</div>"
            for a in "SRA"
        )
    if "bins" in coverage:  # slide fields by magnification
        rows = "".join(
            f"<tr><td>{b}</td><td>{c['fields']}</td><td>{'—' if c['hit'] is None else 'hit' if c['hit'] else 'miss'}"
            f"</td><td>{c['first_hit_seq'] or '—'}</td><td>{c['area_fraction']:.3f}</td></tr>"
            for b, c in coverage.get("bins", {}).items()
        )
        return (
            "<table class=coverage><tr><th>magnification</th><th>fields shown</th><th>ground-truth ROI</th>"
            f"<th>first hit (event)</th><th>slide area seen</th></tr>{rows}</table>"
        )
    return "<p class=na>No coverage for this episode.</p>"


def _model_line(events: list[dict[str, Any]], usage: dict[str, Any]) -> str:
    """Which model answered (provider, id, wire format) and what it cost: tokens, and dollars when priced."""
    start = next((e for e in events if e.get("type") == "agent_start"), None)
    if start is None or not usage.get("turns"):
        return ""
    who = " · ".join(str(start[k]) for k in ("provider", "model", "wire") if start.get(k))
    cost = usage.get("cost_usd")
    money = "no price known (tokens only)" if cost is None else f"${cost:.4f}"
    return (f"<p>Model {html.escape(who)}: {usage['turns']} requests, {usage.get('prompt_tokens', 0)} input tokens "
            f"({usage.get('cached_tokens', 0)} cached), {usage.get('completion_tokens', 0)} output tokens; "
            f"{money}.</p>")  # fmt: skip


def _process_html(process: dict[str, Any]) -> str:
    rows = []
    for key, value in process.items():
        if key in ("coverage", "signature"):
            continue
        score = value.get("score") if isinstance(value, dict) else None
        rest = {k: v for k, v in value.items() if k != "score"} if isinstance(value, dict) else value
        rows.append(
            f"<tr><td>{html.escape(key)}</td><td>{'—' if score is None else f'{score:.2f}'}</td>"
            f"<td><code>{html.escape(json.dumps(rest, ensure_ascii=False))}</code></td></tr>"
        )
    return "<table class=process><tr><th>metric</th><th>score</th><th>detail</th></tr>" + "".join(rows) + "</table>"


def _gallery_link(trace_dir: Path, row: dict[str, Any]) -> str:
    """The marker the galleries link at, with the link when the episode's gallery is already written."""
    from copilot.bench.report.gallery_paths import MARK, link_html

    run_dir = trace_dir.parents[len(Path(row["trace_dir"]).parts) - 1] if row.get("trace_dir") else None
    return MARK + (link_html(run_dir, row) if run_dir is not None else "")


def _back_link(trace_dir: Path, row: dict[str, Any]) -> str:
    depth = len(Path(row["trace_dir"]).parts)
    return "/".join([".."] * depth + ["report.html"])


def write_episode_page(
    run_dir: str | Path,
    row: dict[str, Any],
    prompt: tuple[str, ...] | None = None,
    events: list[dict[str, Any]] | None = None,
) -> Path | None:
    """Write `episode.html` into an episode's trace folder from its trace's `events` (read here when not given;
    None when the trace is missing)."""
    trace_dir = Path(run_dir) / row["trace_dir"]
    events = events if events is not None else recorded_events(trace_dir)
    if events is None:
        return None
    case = None
    root = next((e.get("case_root") for e in events if e.get("type") == "episode_start"), None)
    if root and Path(root, "case.json").is_file():
        case = load_case(root)
    path = trace_dir / PAGE
    path.write_text(render_episode(trace_dir, row, events, case, prompt), encoding="utf-8")
    return path
