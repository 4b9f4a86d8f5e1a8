"""`report.html`: the paper's Tables 1, 2, 3, 5, 6 and 7, process metrics, workflow-guard counts, exploration
coverage and repeat stability (all from result rows alone), a per-track module summary, plots of score
distributions and of the Task–Strict gap (inline SVG, no external assets), and every episode with a link
to its audit page (`episode.html`, or the raw trace when the page is missing)."""

from __future__ import annotations

import html
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.bench.scoring.stats import mean


@dataclass(frozen=True)
class Column:
    """How a benchmark module appears in the report: its title and whether it has a Loc score."""

    title: str
    has_loc: bool


CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222} table{border-collapse:collapse;margin:12px 0}
th,td{border:1px solid #bbb;padding:4px 8px;text-align:right} th{background:#eee} td.l{text-align:left}
td.strict{background:#fff7d6} td.loc{background:#e3f0ff} .muted{color:#888} svg{margin:6px 18px 6px 0}
td.field{background:#f1f1f1} td.up{background:#d4f4d4} td.down{background:#f8d4d4} td.same{background:#e4e4e4}
tr.group td{background:#fafafa;font-weight:600} p.caption{font-size:12px;color:#555;max-width:1100px}
nav a{margin-right:12px} small.ci{color:#555;font-size:10px;white-space:nowrap} .err,td.error{color:#b00}
dl.glossary dt{font-weight:600;margin-top:4px} dl.glossary dd{margin:0 0 0 18px;font-size:13px}
"""



def _fmt(v: float | None) -> str:
    return '<span class="muted">—</span>' if v is None else f"{v:.2f}"


def summary(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(track, policy, module) → n (episodes), task, strict, loc (over the scored ones: errored episodes
    are counted in `errors`, never averaged as zeros)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["track"], r["policy"], r["module"])].append(r)
    out = {}
    for key, g in groups.items():
        ok = [r for r in g if r["status"] != "error"]
        out[key] = {
            "n": len(g),
            "task": mean([r["task"] for r in ok]),
            "strict": mean([r["strict"] for r in ok]),
            "loc": mean([r["loc"] for r in ok if r["loc"] is not None]),
            "errors": len(g) - len(ok),
        }
    return out


def _main_table(track: str, stats: dict[tuple[str, str, str], dict[str, Any]], columns: dict[str, Column]) -> str:
    policies = sorted({p for (t, p, _) in stats if t == track})
    modules = [m for m in columns if any((track, p, m) in stats for p in policies)]
    head1 = "".join(
        f'<th colspan="{3 if columns[m].has_loc else 2}">{html.escape(columns[m].title)}</th>' for m in modules
    )
    head2 = "".join("<th>Task</th><th>Strict</th>" + ("<th>Loc.</th>" if columns[m].has_loc else "") for m in modules)
    body = []
    for p in policies:
        cells = []
        for m in modules:
            s = stats.get((track, p, m), {"task": None, "strict": None, "loc": None, "errors": 0, "n": 0})
            err = f' <span class="err">error {s["errors"]}/{s["n"]}</span>' if s.get("errors") else ""
            cells.append(f"<td>{_fmt(s['task'])}{err}</td><td class=strict>{_fmt(s['strict'])}</td>")
            if columns[m].has_loc:
                cells.append(f"<td class=loc>{_fmt(s['loc'])}</td>")
        body.append(f'<tr><td class="l">{html.escape(p)}</td>{"".join(cells)}</tr>')
    return (
        f'<table class="main" data-track="{track}"><tr><th rowspan="2">Policy / model</th>{head1}</tr>'
        f"<tr>{head2}</tr>{''.join(body)}</table>"
    )


def _histogram(title: str, values: list[float], bins: int = 5) -> str:
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int(v * bins))] += 1
    top = max(counts) or 1
    w, h, bw = 220, 120, 200 / bins
    bars = "".join(
        f'<rect x="{10 + i * bw:.1f}" y="{h - 20 - 80 * c / top:.1f}" width="{bw - 4:.1f}" '
        f'height="{80 * c / top:.1f}" fill="#4a78c2"><title>{c}</title></rect>'
        for i, c in enumerate(counts)
    )
    return (
        f'<svg class="plot hist" width="{w}" height="{h}" role="img" aria-label="{html.escape(title)}">'
        f'<text x="10" y="14" font-size="12">{html.escape(title)}</text>{bars}'
        f'<text x="10" y="{h - 4}" font-size="10">0</text><text x="200" y="{h - 4}" font-size="10">1</text></svg>'
    )


def _gap_chart(stats: dict[tuple[str, str, str], dict[str, Any]]) -> str:
    items = [(f"{t}/{p}/{m}", s["task"] or 0.0, s["strict"] or 0.0) for (t, p, m), s in sorted(stats.items())]
    h = 24 + 22 * len(items)
    rows = []
    for n, (label, task, strict) in enumerate(items):
        y = 20 + 22 * n
        rows.append(
            f'<text x="0" y="{y + 12}" font-size="11">{html.escape(label)}</text>'
            f'<rect x="260" y="{y}" width="{200 * task:.1f}" height="8" fill="#9ab">'
            f"<title>Task {task:.2f}</title></rect>"
            f'<rect x="260" y="{y + 9}" width="{200 * strict:.1f}" height="8" fill="#e0a800">'
            f"<title>Strict {strict:.2f}</title></rect>"
        )
    return (
        f'<svg class="plot gap" width="480" height="{h}" role="img" aria-label="Task vs Strict">'
        f'<text x="0" y="12" font-size="12">Task (grey) vs Strict (amber)</text>{"".join(rows)}</svg>'
    )


ROW_DEFAULTS: dict[str, Any] = {  # rows that predate a key column (the run's database fills them all)
    "ops": "", "protocol": "harness", "budget": 20, "backend": "embedded", "seed": 0, "repeat": 0, "details": {},
    "process": {},
}  # fmt: skip


def _episode_link(r: dict[str, Any], run_dir: Path | None) -> str:
    from copilot.bench.report.episode_page import PAGE

    base = html.escape(r["trace_dir"])
    if run_dir is not None and (run_dir / r["trace_dir"] / PAGE).is_file():
        return f'<a href="{base}/{PAGE}">episode</a> · <a href="{base}/trace.jsonl">trace</a>'
    return f'<a href="{base}/trace.jsonl">trace</a>'


def render_report(rows: list[dict[str, Any]], columns: dict[str, Column], run_dir: str | Path | None = None) -> str:
    """The report page; `columns` lists the benchmark modules in table order; `run_dir` finds episode pages."""
    from copilot.bench.tables.analysis import process_tables
    from copilot.bench.tables.paper import paper_tables
    from copilot.bench.tables.render import glossary_html, to_html

    run = Path(run_dir) if run_dir is not None else None
    rows = [{**ROW_DEFAULTS, "model": r.get("policy"), **r} for r in rows]
    stats = summary(rows)
    extra = {r["module"]: Column(r["module"], r["loc"] is not None) for r in rows if r["module"] not in columns}
    known = {**columns, **extra}
    tracks = sorted({r["track"] for r in rows})
    from copilot.bench.tables.comparisons import model_pairs_table
    from copilot.bench.tables.provenance import provenance_table

    tables = paper_tables(rows) + process_tables(rows) + [model_pairs_table(rows), provenance_table(rows)]
    nav = "".join(f'<a href="#{t.key}">{html.escape(t.title.split(":")[0])}</a>' for t in tables)
    nav += '<a href="#glossary">Glossary</a>'
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>MedFlow report</title><style>{CSS}</style>"
        f"</head><body><h1>MedFlow benchmark report</h1><p>{len(rows)} episodes; written "
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}; scores are fractions (0–1).</p><nav>{nav}</nav>"
    ]
    parts += [to_html(t) for t in tables]
    parts.append(glossary_html())
    for track in tracks:
        parts.append(f"<h2>Track {html.escape(track)}: every module</h2>{_main_table(track, stats, known)}")
    parts.append("<h2>Score distributions</h2><div>")
    for (track, policy, module), _ in sorted(stats.items()):
        values = [r["strict"] for r in rows if (r["track"], r["policy"], r["module"]) == (track, policy, module)]
        parts.append(_histogram(f"Strict: {known[module].title} ({policy}, {track})", values))
    from copilot.bench.measures.perturb import read_perturbations
    from copilot.bench.report.measures_report import measures_html

    measures = measures_html(rows, read_perturbations(run))
    from copilot.bench.report.gallery import index_html

    parts.append(f"</div><h2>Task vs Strict</h2>{_gap_chart(stats)}{measures}{index_html(rows, run)}<h2>Episodes</h2>")
    head = "".join(
        f"<th>{h}</th>"
        for h in ("case", "module", "model", "track", "budget", "repeat", "status", "Task", "Strict", "Loc",
                  "warnings", "parse error", "audit")
    )  # fmt: skip
    body = []
    for r in rows:
        guards = sum((r.get("process") or {}).get("workflow_guards", {}).values())
        body.append(
            f'<tr><td class="l">{html.escape(r["case_id"])}</td><td class="l">{r["module"]}</td>'
            f'<td class="l">{html.escape(r["model"])}</td><td>{r["track"]}{"/" + r["ops"] if r["ops"] else ""}'
            f'{" paper" if r["protocol"] == "paper" else ""}</td>'
            f"<td>{r['budget']}</td><td>{r['repeat']}</td><td>{r['status']}</td>"
            f"<td>{_fmt(r['task'])}</td><td>{_fmt(r['strict'])}</td><td>{_fmt(r['loc'])}</td><td>{guards}</td>"
            f'<td class="l">{html.escape(r["parse_error"] or r.get("error") or "")}</td>'
            f'<td class="l">{_episode_link(r, run)}</td></tr>'
        )
    parts.append(f'<table class="episodes"><tr>{head}</tr>{"".join(body)}</table></body></html>')
    return "".join(parts)


def write_report(
    rows: list[dict[str, Any]],
    path: str | Path,
    columns: dict[str, Column],
    run_dir: str | Path | None = None,
    pages: bool = False,
    galleries: bool = False,
) -> Path:
    """Write report.html; with `galleries` (or `pages`), the final-view galleries of every configuration and case
    first, linked from the pages; with `pages`, every episode's audit page rewritten from its trace as well."""
    path = Path(path)
    if (galleries or pages) and run_dir is not None:
        from copilot.bench.report.gallery import write_galleries

        write_galleries(rows, run_dir, pages=pages)  # each trace read once, for its gallery and its page
    text = render_report(rows, columns, run_dir)
    if run_dir is not None:
        text = relink(text, Path(run_dir), path.parent)
    path.write_text(text, encoding="utf-8")
    return path


def relink(page: str, run_dir: Path, folder: Path) -> str:
    """A page written into `folder` with its links to the run's files (episode pages, traces, galleries) still
    working: each relative href and src gains the way from `folder` to the run folder (in-page anchors and
    absolute URLs untouched)."""
    import os
    import re

    prefix = Path(os.path.relpath(run_dir.resolve(), folder.resolve())).as_posix()
    if prefix == ".":
        return page
    return re.sub(r'\b(href|src)="(?!#|[a-zA-Z][a-zA-Z0-9+.-]*:|/)', lambda m: f'{m.group(1)}="{prefix}/', page)
