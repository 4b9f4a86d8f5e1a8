"""The session report: the audit page of a desktop or `chat` session, in the form the benchmark writes per
episode (`copilot.bench.report.episode_page`): the conversation, the evidence drawn on the views as the app shows
them, then every event of the trace — instructions, model turns, proposals approved and rejected with the
clinician's reason, each call with its arguments, result and images. Identifiers of the study that occur in
the page (it stays on this machine, like the trace) are marked.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from copilot.bench.report.episode_page import CSS, timeline_html
from copilot.bench.report.evidence_figures import png_uri
from copilot.kinds import viewer_kind
from copilot.pacs.store import stored_html
from copilot.panel.answer_evidence import evidence_label
from copilot.panel.banner import BANNER_CSS, study_banner
from copilot.panel.identifiers import study_identifiers
from copilot.panel.screen import Frame, Screen
from copilot.privatefs import write_private
from copilot.tools.lesion_table import lesion_history, measurement_rows
from copilot.trace.study_ref import SIDECAR, study_record

FIGURE_SIZE = (320, 320)
MARK_CSS = (
    "mark.phi{background:#ffd34d;padding:0 2px} .phi-note{background:#fff2cc;padding:6px;border:1px solid #e0b000}"
)
EVIDENCE_RED = (255, 40, 40)
KEY_LINE = (255, 215, 0)


def draw_markers(frame: Frame) -> Image.Image:
    """A pane's pixels with its evidence drawn: points as red crosses in a ring, key-slice lines in yellow."""
    img = Image.fromarray(np.ascontiguousarray(frame.pixels)).convert("RGB")
    draw = ImageDraw.Draw(img)
    for m in frame.markers:
        if m.kind in ("point", "overview_point"):
            x, y = m.coords[:2]
            r = 7 if m.kind == "point" else 4
            draw.ellipse([x - r, y - r, x + r, y + r], outline=EVIDENCE_RED, width=2)
            draw.line([(x - r - 3, y), (x + r + 3, y)], fill=EVIDENCE_RED, width=1)
            draw.line([(x, y - r - 3), (x, y + r + 3)], fill=EVIDENCE_RED, width=1)
        elif m.kind == "line":
            draw.line([tuple(m.coords[:2]), tuple(m.coords[2:4])], fill=KEY_LINE, width=1)
        elif m.kind == "box":
            draw.rectangle(list(m.coords[:4]), outline=(40, 110, 230), width=2)
    return img


def evidence_figures(session: Any, evidence: list[dict[str, Any]]) -> list[tuple[Image.Image, str, Frame]]:
    """The views as they stand, rendered without moving them, with the evidence drawn."""
    screen = Screen(session)
    try:
        kind = viewer_kind(session.kind)
        out = []
        for pane in kind.view_names:
            frame = screen.frame(pane, FIGURE_SIZE, evidence)
            if frame is None:
                continue
            if not kind.slice_views:
                caption = f"{kind.image_name} view"  # 'slide view', a plug-in's 'picture view'
            else:
                v = screen.view(pane)
                caption = f"{v.orientation} {v.axis_label} = {v.offset:.1f} mm"
            out.append((draw_markers(frame), caption, frame))
        return out
    finally:
        screen.detach()  # the report's own screen stops following the scene


def mark_identifiers(page: str, identifiers: list[str]) -> tuple[str, int]:
    """Wrap every identifier occurring in the page's text (not in its tags) in <mark class=phi>."""
    escaped = sorted({html.escape(i, quote=False) for i in identifiers if i}, key=len, reverse=True)
    if not escaped:
        return page, 0
    body = "|".join(re.escape(i) for i in escaped)
    pattern = re.compile(rf"(?<![A-Za-z0-9])(?:{body})(?![A-Za-z0-9])", re.IGNORECASE)
    count = 0

    def mark(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return f'<mark class="phi" title="identifier from the study">{m.group(0)}</mark>'

    parts = re.split(r"(<[^>]*>)", page)
    for n, part in enumerate(parts):
        if part and not part.startswith("<"):
            parts[n] = pattern.sub(mark, part)
    return "".join(parts), count


def _inline_artifacts(page: str, trace_dir: Path) -> str:
    """Artifact images as data URIs, for a report written away from its trace folder."""

    def inline(m: re.Match[str]) -> str:
        path = trace_dir / html.unescape(m.group(1))
        if not path.is_file():
            return m.group(0)
        mime = "image/jpeg" if path.suffix == ".jpg" else "image/png"
        return f'src="data:{mime};base64,{base64.b64encode(path.read_bytes()).decode("ascii")}"'

    return re.sub(r'src="(artifacts/[^"]+)"', inline, page)


def study_line(trace_dir: Path | None) -> str:
    """Which study the trace's pseudonymous reference stands for, from the owner-only sidecar (for the clinician:
    the trace itself records only the reference); '' when the session kept none."""
    record = study_record(trace_dir) if trace_dir is not None else None
    if not record:
        return ""
    inputs = dict(record.get("case_inputs") or {})
    origin = dict(inputs.get("origin") or {})
    uids = [f"series {u}" for u in ([inputs["series_uid"]] if inputs.get("series_uid") else [])]
    uids += [f"PACS study {origin['study']}"] if origin.get("study") else []
    return (
        f"<p class='study-ref'>The trace names this study <code>{html.escape(str(record.get('study_ref')))}</code>: "
        f"folder <code>{html.escape(str(record.get('case_root')))}</code>"
        + "".join(f", {html.escape(u)}" for u in uids)
        + f" (kept beside the trace in the owner-only <code>{SIDECAR}</code>).</p>"
    )


def measurements_html(evidence: list[dict[str, Any]], derived: Path | None, case_root: Path | None) -> str:
    """The measurement table (each recorded measurement's numbers) and the tracked lesions' history per time
    point; nothing when the session measured nothing."""
    rows = measurement_rows(evidence)
    history = lesion_history(derived, case_root, evidence)
    if not rows and not history.lesions:
        return ""
    out = ["<h2>Measurements</h2>"]
    if rows:
        out.append("<table><tr><th>finding</th><th>kind</th><th>numbers</th></tr>" + "".join(
            f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape(c)}</td></tr>"
            for a, b, c in rows) + "</table>")  # fmt: skip
    if history.lesions:
        head = "".join(f"<th>{html.escape(t)}</th>" for t in history.time_points)
        body = "".join(f"<tr><td>{html.escape(name)}</td>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells)
                       + "</tr>" for name, cells in history.lesions)  # fmt: skip
        out.append(f"<h3>Tracked lesions</h3><table><tr><th>lesion</th>{head}</tr>{body}</table>")
    return "".join(out)


def render_session(model: Any, events: list[dict[str, Any]], identifiers: list[str], inline: Path | None) -> str:
    """The page's HTML (`inline`: the trace folder whose artifacts are embedded)."""
    session, case = model.session, model.case
    banner = study_banner(case)
    title = f"Session report — {banner.label}"
    trace_dir = session.trace_dir
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{CSS}{MARK_CSS}{BANNER_CSS}</style></head><body><h1>{html.escape(title)}</h1>",
        banner.to_html(),
        f"<p>{html.escape(session.kind)} study; status {html.escape(str(model.status))}; {len(events)} trace events"
        + (f"; trace <code>{html.escape(str(trace_dir))}</code> (verify with <code>medcopilot replay "
           f"{html.escape(str(trace_dir))}</code>)" if trace_dir else "; no trace was kept")
        + "</p>",
        study_line(trace_dir),
        "@@PHI@@",
        "<h2>Conversation</h2>",
    ]  # fmt: skip
    for who, text in model.messages:
        parts.append(f'<div class="turn"><b>{html.escape(who)}</b><pre>{html.escape(text)}</pre></div>')
    evidence = model.evidence
    parts.append("<h2>Evidence</h2>")
    if evidence:
        parts.append("<ol>" + "".join(f"<li>{html.escape(evidence_label(e))}</li>" for e in evidence) + "</ol>")
    else:
        parts.append("<p class=na>No evidence was recorded or stated.</p>")
    parts.append("<h2>Evidence drawn on the views</h2>")
    try:
        for image, caption, _ in evidence_figures(session, evidence):
            parts.append(
                f'<figure><img class="evidence-view" src="{png_uri(image)}"><figcaption>{html.escape(caption)}'
                "</figcaption></figure>"
            )
        parts.append('<p class="legend"><span style="color:#e22">○ evidence point</span>'
                     '<span style="color:#c90">— key slice</span></p>')  # fmt: skip
    except Exception as exc:  # a view that cannot be drawn: the rest of the page still stands
        parts.append(f"<p class=na>Cannot draw the evidence: {html.escape(f'{type(exc).__name__}: {exc}')}</p>")
    parts.append(measurements_html(evidence, trace_dir / "derived" if trace_dir is not None else None, case.root))
    parts.append(stored_html(trace_dir / "derived" if trace_dir is not None else None))  # what went to a PACS
    parts.append("<h2>Session</h2>" + timeline_html(events) + "</body></html>")
    page = "".join(parts)
    if inline is not None:
        page = _inline_artifacts(page, inline)
    page, count = mark_identifiers(page, identifiers)
    note = (
        f'<p class="phi-note">This page holds {count} occurrence(s) of the study\'s identifiers, '
        "<mark class=phi>marked like this</mark>. They stay on this machine: requests to the model never carry "
        "them.</p>"
        if count
        else "<p>No identifier of the study occurs in this page.</p>"
    )
    return page.replace("@@PHI@@", note, 1)


def write_session_report(model: Any, path: str | Path) -> Path:
    """Write the session's audit page to `path` (images embedded unless it lies in the trace folder)."""
    out = Path(path)
    session = model.session
    trace_dir = session.trace_dir
    case = model.case
    try:
        identifiers = sorted(study_identifiers(case.root, dict(case.inputs or {}), session.kind))
    except Exception:  # unreadable headers: nothing to mark
        identifiers = []
    inline = trace_dir if trace_dir is not None and out.resolve().parent != Path(trace_dir).resolve() else None
    return write_private(out, render_session(model, session.trace_events(), identifiers, inline))
