"""Galleries of final views across repeated runs (the MedFlow paper's Figs 8–9): per run configuration and case,
one column per run with the last image each view showed the agent, beside the run's final planes (or slide
field) drawn at report time over the case with its hidden lesion mask or target regions. The hidden truth is
read only here, by the report writer, from the case pack the trace names; each episode page links its gallery."""

from __future__ import annotations

import hashlib
import html
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from PIL import ImageDraw

from copilot.bench.measures.configs import config_of, label
from copilot.bench.measures.trace_views import recorded_events
from copilot.bench.report.gallery_paths import MARK, gallery_path, link_html
from copilot.bench.scoring.scorers import Truth
from copilot.cases.pack import CasePack, load_case

VIEWS = {"red": "S", "yellow": "R", "green": "A"}  # axial, sagittal, coronal
ORDER = {name: n for n, name in enumerate(VIEWS)}
SIZE = 160


def final_view(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the run ended on: the state of the last call that returned an image, the last image artifact per view,
    and the points the agent recorded (RAS or level-0 slide pixels)."""
    state: dict[str, Any] = {}
    images: dict[str, str] = {}
    points: list[list[float]] = []
    for e in events:
        if e.get("type") != "handler_call" or not e.get("ok"):
            continue
        for im in e.get("images") or []:
            if im.get("artifact"):
                images[str(im.get("view") or "viewer")] = str(im["artifact"])
        if e.get("images") and e.get("state"):
            state = e["state"]
        ev = (e.get("result") or {}).get("evidence")
        if e.get("actor") == "agent" and isinstance(ev, dict):
            if ev.get("kind") == "point" and ev.get("ras") is not None:
                points.append([float(v) for v in ev["ras"]])
            elif isinstance(ev.get("point"), dict):
                points.append([float(ev["point"]["x"]), float(ev["point"]["y"])])
    return {"state": state, "images": images, "points": points}


def _radiology_cells(case: CasePack, truth: Truth, final: dict[str, Any], answer: dict[str, Any]) -> list[str]:
    """The run's final planes of the source series with the hidden lesion (green), the other planes (yellow) and
    the cited RAS point (red)."""
    from copilot.bench.report.evidence_figures import radiology_figures

    views = final["state"].get("views") or {}
    planes = {VIEWS[n]: float(v["offset"]) for n, v in views.items() if n in VIEWS and "offset" in v}
    figures = radiology_figures(case, truth, {"key_slices": planes, "ras": answer.get("ras")}, size=SIZE)
    names = ("axial", "sagittal", "coronal")
    return [f'<img src="{uri}" alt="{n}" title="{n}">' for (uri, _), n in zip(figures, names, strict=False)]


def _slide_cell(case: CasePack, truth: Truth, final: dict[str, Any], cache: dict[str, Any]) -> list[str]:
    """The slide overview with the target regions (green), the run's final field (blue) and its recorded
    points (yellow)."""
    from copilot.bench.report.evidence_figures import png_uri
    from copilot.engine.slide.source import SlideSource

    if "thumb" not in cache:
        src = SlideSource(case.root / str(case.inputs.get("slide", "")))
        try:
            cache["w0"] = src.info.dimensions[0]
            cache["thumb"] = src.make_thumbnail(2 * SIZE).convert("RGB")
        finally:
            src.close()
    thumb = cache["thumb"].copy()
    s = thumb.width / cache["w0"]
    draw = ImageDraw.Draw(thumb, "RGBA")
    for ann in truth.annotations:
        pts = [(float(px) * s, float(py) * s) for px, py in np.asarray(ann.exterior)]
        draw.polygon(pts, outline=(120, 120, 120, 255) if ann.cls.lower() == "exclusion" else (0, 190, 0, 255), width=2)
    region = final["state"].get("visible_region")
    if isinstance(region, list) and len(region) == 4:  # level-0 x0, y0, x1, y1
        draw.rectangle([float(v) * s for v in region], outline=(40, 110, 230, 255), width=2)
    for x, y in final["points"]:
        draw.ellipse([x * s - 4, y * s - 4, x * s + 4, y * s + 4], outline=(240, 200, 0, 255), width=2)
    return [f'<img src="{png_uri(thumb)}" alt="overview">']


def _column(run_dir: Path, row: dict[str, Any], events: list[dict[str, Any]] | None, case: CasePack | None,
            truth: Truth | None, cache: dict[str, Any], gallery: str) -> tuple[str, str, str]:  # fmt: skip
    """(heading, the agent's last images, the report-time drawing) of one run (`events`: its trace's, None without)."""
    from copilot.bench.report.episode_page import PAGE

    trace_dir = run_dir / row["trace_dir"]
    up = os.path.relpath(trace_dir, (run_dir / gallery).parent).replace(os.sep, "/")
    loc = "—" if row.get("loc") is None else f"{row['loc']:.2f}"
    head = (f'<a href="{html.escape(up)}/{PAGE}">repeat {row.get("repeat", 0)} · seed {row.get("seed", 0)}</a><br>'
            f"{html.escape(str(row['status']))} · Task {row['task']:.2f} · Strict {row['strict']:.2f} · "
            f"Loc {loc}")  # fmt: skip
    if events is None:
        return head, '<span class="na">no trace</span>', ""
    final = final_view(events)
    shown = "".join(
        f'<img src="{html.escape(up)}/{html.escape(a)}" alt="{html.escape(v)}" title="{html.escape(v)}">'
        for v, a in sorted(final["images"].items(), key=lambda kv: (ORDER.get(kv[0], len(ORDER)), kv[0]))
    ) or '<span class="na">no image shown</span>'
    if case is None or truth is None:
        return head, shown, '<span class="na">case pack not readable from here</span>'
    try:
        answer = (row.get("details") or {}).get("answer") or {}
        cells = _slide_cell(case, truth, final, cache) if case.inputs.get("slide") else \
            _radiology_cells(case, truth, final, answer)  # fmt: skip
    except Exception as exc:  # a moved or unreadable case: the other runs still stand
        why = html.escape(f"{type(exc).__name__}: {exc}")
        return head, shown, f'<span class="na">cannot draw: {why}</span>'
    return head, shown, "".join(cells)


CSS = """body{font-family:system-ui,sans-serif;margin:20px;color:#222} table{border-collapse:collapse}
th,td{border:1px solid #bbb;padding:4px;vertical-align:top;font-size:12px} th{background:#eee;font-weight:normal}
td img{width:120px;margin:1px;vertical-align:top} h1{font-size:20px} .na{color:#888}
p.caption{font-size:12px;color:#555;max-width:1100px}"""


def render_gallery(
    run_dir: Path, rows: list[dict[str, Any]], gallery: str, traces: list[list[dict[str, Any]] | None]
) -> str:
    """The gallery page of one configuration and case (rows: its runs, in repeat and seed order; `traces`: the
    events of each run's trace, None where it has none)."""
    first = rows[0]
    case = truth = None
    root = _case_root(traces[0])
    if root is not None:
        case = load_case(root)
        truth = Truth(case)
    cache: dict[str, Any] = {}
    cols = [_column(run_dir, r, events, case, truth, cache, gallery) for r, events in zip(rows, traces, strict=True)]
    back = "/".join([".."] * len(Path(gallery).parts[:-1]) + ["report.html"])
    title = f"{first['case_id']} · {label(config_of(first))}: final views of {len(rows)} run(s)"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{CSS}</style>"
        f'</head><body><p><a href="{back}">← report</a></p><h1>{html.escape(title)}</h1><p class="caption">As the '
        "MedFlow paper's Figs 8–9: one column per run of the same case and configuration. Top: the last image each "
        "view showed the agent (with whatever fusion or segment overlay it had made). Bottom, drawn now from the case "
        "and its hidden truth (never shown to the agent): radiology — the run's final axial, sagittal and coronal "
        "planes of the source series with the hidden lesion mask (green), the other final planes (yellow lines) and "
        "the answer's RAS point (red); slides — the overview with the target regions (green), the final field (blue) "
        "and the recorded points (yellow).</p><table><tr><th></th>"
        + "".join(f"<th>{h}</th>" for h, _, _ in cols)
        + "</tr><tr><th>shown to the agent</th>" + "".join(f"<td>{s}</td>" for _, s, _ in cols)
        + "</tr><tr><th>final planes with the hidden truth</th>" + "".join(f"<td>{d}</td>" for _, _, d in cols)
        + "</tr></table></body></html>"
    )  # fmt: skip


def _case_root(events: list[dict[str, Any]] | None) -> Path | None:
    """The case pack an episode's trace header names, when it is still readable."""
    head = events[0] if events else {}
    root = head.get("case_root")
    return Path(root) if root and Path(root, "case.json").is_file() else None


def _stamp(group: list[dict[str, Any]]) -> str:
    """A comment naming the runs a gallery was drawn from (trace folder, finish time, status)."""
    key = json.dumps([[r.get("trace_dir"), r.get("finished_at"), r.get("status")] for r in group], default=str)
    return f"<!-- runs {hashlib.sha256(key.encode()).hexdigest()[:16]} -->"


class _Traces:
    """The events of each episode's trace, read on first use and kept while its case's gallery and pages are drawn."""

    def __init__(self, run_dir: Path) -> None:
        self._run = run_dir
        self._events: dict[str, list[dict[str, Any]] | None] = {}

    def __call__(self, row: dict[str, Any]) -> list[dict[str, Any]] | None:
        key = row["trace_dir"]
        if key not in self._events:
            self._events[key] = recorded_events(self._run / key)
        return self._events[key]


def write_galleries(rows: list[dict[str, Any]], run_dir: str | Path, pages: bool = False) -> list[str]:
    """Write a gallery per configuration and case (redrawn only when its runs changed), and link each episode
    page that exists to its gallery; with `pages`, (re)write every episode's page as well, from the same reading
    of its trace (each trace is read at most once)."""
    from copilot.bench.report.episode_page import PAGE, write_episode_page

    run = Path(run_dir)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("trace_dir"):
            groups[gallery_path(r)].append(r)
    for gallery, group in sorted(groups.items()):
        group.sort(key=lambda r: (r.get("repeat", 0), r.get("seed", 0)))
        path = run / gallery
        stamp = _stamp(group)
        events = _Traces(run)  # one case's traces, for its gallery and its pages
        if not (path.is_file() and stamp in path.read_text(encoding="utf-8")):  # unchanged runs: not redrawn
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render_gallery(run, group, gallery, [events(r) for r in group]) + stamp, encoding="utf-8")
        for r in group:
            page = run / r["trace_dir"] / PAGE
            if pages:  # written after its gallery, so it carries the link
                write_episode_page(run, r, events=events(r))
            elif page.is_file():
                text = page.read_text(encoding="utf-8")
                if MARK in text and 'class="gallery"' not in text:
                    page.write_text(text.replace(MARK, MARK + link_html(run, r), 1), encoding="utf-8")
    return sorted(groups)


def index_html(rows: list[dict[str, Any]], run_dir: Path | None) -> str:
    """The report's list of the galleries written for this run ('' when none)."""
    if run_dir is None:
        return ""
    found: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for gallery in sorted({gallery_path(r) for r in rows if r.get("trace_dir")}):
        if (run_dir / gallery).is_file():
            group = [r for r in rows if r.get("trace_dir") and gallery_path(r) == gallery]
            found[label(config_of(group[0]))].append((gallery, len(group)))
    if not found:
        return ""
    items = "".join(
        f"<li>{html.escape(key)}: "
        + ", ".join(f'<a href="{html.escape(g)}">{html.escape(Path(g).stem)}</a> ({n})' for g, n in links)
        + "</li>"
        for key, links in found.items()
    )
    return ('<h2 id="galleries">Final views across repeated runs (Figs 8–9)</h2><p class="caption">Per run '
            "configuration, each case's gallery (runs in brackets): the agent's last images beside its final planes "
            f"drawn over the hidden truth.</p><ul>{items}</ul>")  # fmt: skip
