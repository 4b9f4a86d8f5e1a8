"""The measurement table and the lesion history a session shows: each recorded measurement in words, and each
tracked lesion's long × short axes per time point — earlier time points from the patient's earlier reports (by
Tracking UID), this one from the session's evidence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.tools.response_measures import earlier_time_points, measured_lesions
from copilot.tools.tracking import BOOK, name_key, prior_reports, search_folders


def numbers(rec: dict[str, Any]) -> str:
    """A measurement record's numbers in words ('' for evidence without any)."""
    kind = rec.get("kind")
    if kind == "distance":
        return f"{float(rec['distance_mm']):.1f} mm"
    if kind == "bidirectional":
        return f"{float(rec['long_mm']):.1f} × {float(rec['short_mm']):.1f} mm"
    if kind == "angle":
        return f"{float(rec['angle_deg']):.1f}°"
    if kind not in ("measurement", "ellipse"):
        return ""
    values, unit = dict(rec.get("values") or {}), str(rec.get("units") or "")
    words = [f"{k} {v:g} {unit}".strip() for k, v in values.items()]
    suv = rec.get("suv") or {}
    if suv.get("available") and isinstance(suv.get("bw"), dict):
        words += [f"SUVbw {k} {v:g}" for k, v in suv["bw"].items()]
    if rec.get("area_mm2") is not None:
        words.append(f"area {float(rec['area_mm2']):.1f} mm²")
    if rec.get("volume_ml") is not None:
        words.append(f"volume {float(rec['volume_ml']):g} ml")
    return ", ".join(words)


def measurement_rows(evidence: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(finding, kind, numbers) of each recorded measurement, in the order recorded."""
    rows = []
    for rec in evidence:
        if said := numbers(rec):
            name = str(rec.get("label") or f"{rec.get('kind')} {rec.get('evidence_id')}")
            rows.append((name, str(rec["kind"]), said))
    return rows


@dataclass(frozen=True)
class History:
    """Time point names (the last is this session) and, per tracked lesion, its axes at each ('' where none)."""

    time_points: list[str]
    lesions: list[tuple[str, list[str]]]


def lesion_history(derived: Path | None, case_root: Path | None, evidence: list[dict[str, Any]]) -> History:
    """The history of the lesions this session tracks (its `lesions.json`), with the patient's earlier reports."""
    book_file = Path(derived) / BOOK if derived is not None else None
    if book_file is None or not book_file.is_file():
        return History([], [])
    book = json.loads(book_file.read_text(encoding="utf-8"))
    tracked = [(v["identifier"], v["uid"]) for k, v in (book.get("lesions") or {}).items() if not k.startswith("\x00")]
    earlier = earlier_time_points(prior_reports(search_folders(case_root, derived), str(book.get("patient") or "")), "")
    now = measured_lesions(evidence)

    def axes(long_mm: float | None, short_mm: float | None) -> str:
        if long_mm is None:
            return ""
        return f"{long_mm:.1f}" + (f" × {short_mm:.1f}" if short_mm is not None else "") + " mm"

    rows = []
    for name, uid in tracked:
        cells = [axes(*p.lesions[uid][1:]) if uid in p.lesions else "" for p in earlier]
        m = now.get(name_key(name))
        rows.append((name, [*cells, axes(m.long_mm, m.short_mm) if m else ""]))
    return History([p.label for p in earlier] + ["this session"], rows)
