"""Evidence items from the agent's final answer (Qt-free): the EVIDENCE block's key slices and RAS point,
and the slide localizations of a pathology JSON answer, in the same form as the records of the
record_* handlers, so that the panel lists them, draws them and moves the views to them alike.

A study conversation's answer may end with the free-form block (docs/study_mode.md), any subset of lines:

    EVIDENCE:
    KEY_SLICE_AXIAL_MM: -12.5          (also SAGITTAL, CORONAL: canonical offsets in mm)
    RAS: [R, A, S] optional label      (one line per point)
    DISTANCE_MM: [R, A, S] -> [R, A, S] optional label
    WSI: [x, y] optional label         (level-0 slide pixels)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from copilot.bench.scoring.parsers import NUMBER, ParseError, clean_answer, parse_evidence, parse_localizations
from copilot.cases.answers import EVIDENCE_KEYS
from copilot.kind_names import PATHOLOGY, RADIOLOGY
from copilot.kinds import kinds

AXIS_VIEW = {"S": "red", "R": "yellow", "A": "green"}
_TRIPLE = rf"\[?\s*({NUMBER})\s*,\s*({NUMBER})\s*,\s*({NUMBER})\s*\]?"
_PAIR = rf"\[?\s*({NUMBER})\s*,\s*({NUMBER})\s*\]?"
_LINE = {
    "key_slice": re.compile(rf"(?i)^\s*[-*]?\s*({'|'.join(EVIDENCE_KEYS)})\s*[:=]\s*({NUMBER})\s*(?:mm)?\s*$"),
    "point": re.compile(rf"(?i)^\s*[-*]?\s*RAS\s*[:=]\s*{_TRIPLE}\s*(.*)$"),
    "distance": re.compile(rf"(?i)^\s*[-*]?\s*DISTANCE(?:_MM)?\s*[:=]\s*{_TRIPLE}\s*(?:->|→|to|,)\s*{_TRIPLE}\s*(.*)$"),
    "wsi_point": re.compile(rf"(?i)^\s*[-*]?\s*WSI(?:_POINT)?\s*[:=]\s*{_PAIR}\s*(.*)$"),
}


def answer_evidence(text: str, kind: str) -> list[dict[str, Any]]:
    """The evidence an answer states; an answer without any gives an empty list."""
    if not text:
        return []
    strict = STRICT_READERS.get(kind, _none)(text)
    free = free_evidence(text, kind)
    return free if len(free) > len(strict) else strict


def _label(rest: str, default: str) -> str:
    rest = rest.strip().strip("-—:()").strip()
    return rest[:80] if rest else default


def free_evidence(text: str, kind: str) -> list[dict[str, Any]]:
    """The items of the last free-form EVIDENCE block (lines it cannot read are skipped; none: [])."""
    lines = clean_answer(text).split("\n")
    starts = [n for n, line in enumerate(lines) if re.match(r"(?i)^\s*EVIDENCE\s*:\s*$", line)]
    if not starts:
        return []
    items: list[dict[str, Any]] = []
    stated = k.evidence_lines if (k := kinds().get(kind)) is not None else ()
    for line in lines[starts[-1] + 1 :]:
        if not line.strip():
            continue
        item = _free_line(line, stated, len(items) + 1)
        if item is not None:
            items.append(item)
    return items


def _free_line(line: str, stated: tuple[str, ...], n: int) -> dict[str, Any] | None:
    """One free-form line as an evidence item, when the viewer kind's answers may state its sort."""
    m = _LINE["key_slice"].match(line)
    if m and "key_slice" in stated:
        axis = EVIDENCE_KEYS[next(k for k in EVIDENCE_KEYS if k.lower() == m.group(1).lower())]
        offset = float(m.group(2))
        return None if not math.isfinite(offset) else {
            "kind": "key_slice", "label": f"answer key slice {axis}", "view": AXIS_VIEW[axis], "axis": axis,
            "offset_mm": offset, "source": "answer"}  # fmt: skip
    m = _LINE["distance"].match(line)
    if m and "distance" in stated:
        a, b = [float(v) for v in m.groups()[:3]], [float(v) for v in m.groups()[3:6]]
        if not all(math.isfinite(v) for v in a + b):
            return None
        return {"kind": "distance", "label": _label(m.group(7), f"answer distance {n}"), "a": {"ras": a},
                "b": {"ras": b}, "distance_mm": round(math.dist(a, b), 3), "source": "answer"}  # fmt: skip
    m = _LINE["point"].match(line)
    if m and "point" in stated:
        ras = [float(v) for v in m.groups()[:3]]
        label = _label(m.group(4), f"answer point {n}")
        return None if not all(math.isfinite(v) for v in ras) else {
            "kind": "point", "label": label, "ras": ras, "source": "answer"}  # fmt: skip
    m = _LINE["wsi_point"].match(line)
    if m and "wsi_point" in stated:
        x, y = float(m.group(1)), float(m.group(2))
        return None if not (math.isfinite(x) and math.isfinite(y)) else {
            "kind": "wsi_point", "label": _label(m.group(3), f"answer point {n}"), "point": {"x": x, "y": y},
            "source": "answer"}  # fmt: skip
    return None


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


def _none(text: str) -> list[dict[str, Any]]:
    return []


STRICT_READERS: dict[str, Callable[[str], list[dict[str, Any]]]] = {  # the benchmark answer format of each kind
    RADIOLOGY: _radiology,  # its EVIDENCE block: a RAS point and three key slices
    PATHOLOGY: _pathology,  # its JSON localizations
}


def focus_point(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The item the views should show once the answer is in: its RAS point, else its first slide point."""
    return next((e for e in items if "ras" in e), None) or next((e for e in items if "point" in e), None)


def evidence_label(ev: dict[str, Any]) -> str:
    """One line for the evidence list: kind, label and where it is (offsets and lengths in mm)."""
    key = next((k for k in ("ras", "offset_mm", "point", "distance_mm") if ev.get(k) is not None), "")
    where: Any = ev.get(key, "") if key else ""
    if isinstance(where, dict):
        where = f"x {float(where['x']):.0f}, y {float(where['y']):.0f}"
    elif isinstance(where, list):
        where = "[" + ", ".join(f"{float(v):.1f}" for v in where) + "]"
    elif key in ("offset_mm", "distance_mm"):  # lengths and offsets say their unit
        where = f"{float(where):.1f} mm"
    src = " (answer)" if ev.get("source") == "answer" else ""
    return f"{ev.get('kind')}: {ev.get('label') or ''} {where}{src}".replace("  ", " ")
