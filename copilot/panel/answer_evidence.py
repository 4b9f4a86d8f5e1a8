"""Evidence items from the agent's final answer (Qt-free): the EVIDENCE block's key slices and RAS point,
and the slide localizations of a pathology JSON answer, in the same form as the records of the
record_* handlers, so that the panel lists them, draws them and moves the views to them alike."""

from __future__ import annotations

from typing import Any

from copilot.bench.parsers import ParseError, parse_evidence, parse_localizations

AXIS_VIEW = {"S": "red", "R": "yellow", "A": "green"}


def answer_evidence(text: str, kind: str) -> list[dict[str, Any]]:
    """The evidence an answer states; an answer without any gives an empty list."""
    if not text:
        return []
    return _radiology(text) if kind == "radiology" else _pathology(text)


def _radiology(text: str) -> list[dict[str, Any]]:
    try:
        ev = parse_evidence(text)
    except ParseError:
        return []
    items: list[dict[str, Any]] = [
        {"kind": "point", "label": "answer RAS", "ras": [float(v) for v in ev.ras], "source": "answer"}
    ]
    for axis, offset in ev.key_slices.items():
        view = AXIS_VIEW[axis]
        items.append(
            {"kind": "key_slice", "label": f"answer key slice {axis}", "view": view, "axis": axis,
             "offset_mm": float(offset), "source": "answer"}
        )  # fmt: skip
    return items


def _pathology(text: str) -> list[dict[str, Any]]:
    try:
        points = parse_localizations(text)
    except ParseError:
        return []
    return [
        {"kind": "wsi_point", "label": f"answer point {n + 1}", "point": {"x": x, "y": y}, "source": "answer"}
        for n, (x, y) in enumerate(points)
    ]


def focus_point(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The item the views should show once the answer is in: its RAS point, else its first slide point."""
    return next((e for e in items if "ras" in e), None) or next((e for e in items if "point" in e), None)


def evidence_label(ev: dict[str, Any]) -> str:
    """One line for the evidence list: kind, label and where it is."""
    where = next((ev[k] for k in ("ras", "offset_mm", "point", "distance_mm") if ev.get(k) is not None), "")
    if isinstance(where, dict):
        where = f"x {float(where['x']):.0f}, y {float(where['y']):.0f}"
    elif isinstance(where, list):
        where = "[" + ", ".join(f"{float(v):.1f}" for v in where) + "]"
    src = " (answer)" if ev.get("source") == "answer" else ""
    return f"{ev.get('kind')}: {ev.get('label') or ''} {where}{src}".replace("  ", " ")
