"""The lesion measurements a response is computed from: this time point's from the session's evidence, earlier ones
from the patient's earlier response reports (matched by Tracking UID).

A lesion is measured at this time point by a bidirectional measurement labelled with its name, or by distances so
labelled: the longest is its long axis, the next its short (perpendicular) axis. An earlier report gives, per
study, its time point and each group's Tracking UID with its Long axis and Short axis NUM items.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pydicom

from copilot.tools.sr_content import GENERIC_LABEL
from copilot.tools.tracking import TRACKING_ID, TRACKING_UID, name_key

LONG_AXIS = "103339001"  # SCT Long axis
SHORT_AXIS = "103340004"  # SCT Short axis
TIME_POINT = "C2348792"  # UMLS Time Point (TID 1502)


@dataclass
class Measured:
    """One lesion at this time point: its name, long and short axes (mm) and the distance records they are."""

    name: str
    long_mm: float
    short_mm: float | None
    records: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Earlier:
    """One earlier time point: its label, study date and each lesion's (name, long mm, short mm) by Tracking UID."""

    label: str
    date: str
    lesions: dict[str, tuple[str, float | None, float | None]] = field(default_factory=dict)


def measured_lesions(evidence: Iterable[dict[str, Any]]) -> dict[str, Measured]:
    """The lesions this time point measures: name key → its axes, from distances labelled with its name."""
    found: dict[str, list[dict[str, Any]]] = {}
    names: dict[str, str] = {}
    for rec in evidence:
        label = str(rec.get("label") or "").strip()
        if not label or GENERIC_LABEL.match(label):
            continue
        if rec.get("kind") == "bidirectional":  # its two axes, as the distances they are
            axes = [{"a": rec[ax]["a"], "b": rec[ax]["b"], "distance_mm": rec[f"{ax}_mm"]} for ax in ("long", "short")]
            found.setdefault(name_key(label), []).extend(axes)
        elif rec.get("kind") == "distance":
            found.setdefault(name_key(label), []).append(rec)
        else:
            continue
        names.setdefault(name_key(label), label)
    out: dict[str, Measured] = {}
    for key, recs in found.items():
        recs = sorted(recs, key=lambda r: -float(r["distance_mm"]))[:2]
        short = float(recs[1]["distance_mm"]) if len(recs) > 1 else None
        out[key] = Measured(names[key], float(recs[0]["distance_mm"]), short, recs)
    return out


def _code(item: pydicom.Dataset) -> str:
    seq = item.get("ConceptNameCodeSequence")
    return str(seq[0].CodeValue) if seq else ""


def _num(item: pydicom.Dataset) -> float | None:
    seq = item.get("MeasuredValueSequence")
    return float(seq[0].NumericValue) if seq else None


def _groups(items: Iterable[pydicom.Dataset]) -> Iterable[pydicom.Dataset]:
    pending = list(items)
    while pending:
        item = pending.pop()
        children = item.get("ContentSequence") or []
        if any(_code(c) == TRACKING_UID for c in children):
            yield item
        pending.extend(children)


def earlier_time_points(reports: Iterable[pydicom.Dataset], current_study: str) -> list[Earlier]:
    """The patient's earlier time points (other studies than this one) with lesion axes, oldest first."""
    by_study: dict[str, Earlier] = {}
    for ds in reports:
        study = str(ds.get("StudyInstanceUID") or "")
        if not study or study == current_study:
            continue
        for group in _groups(ds.get("ContentSequence") or []):
            children = list(group.get("ContentSequence") or [])
            values = {_code(c): c for c in children}
            long_mm = _num(values[LONG_AXIS]) if LONG_AXIS in values else None
            if long_mm is None:
                continue
            uid = str(values[TRACKING_UID].UID)
            name = str(values[TRACKING_ID].TextValue) if TRACKING_ID in values else uid
            short_mm = _num(values[SHORT_AXIS]) if SHORT_AXIS in values else None
            label = next((str(c.TextValue) for c in _time_points(children)), "") or str(ds.get("StudyDate") or study)
            point = by_study.setdefault(study, Earlier(label, str(ds.get("StudyDate") or "")))
            point.lesions.setdefault(uid, (name, long_mm, short_mm))
    return sorted(by_study.values(), key=lambda p: (p.date, p.label))


def _time_points(children: list[pydicom.Dataset]) -> Iterable[pydicom.Dataset]:
    """The Time Point TEXT items of a group's time point context."""
    for child in children:
        for item in [child, *(child.get("ContentSequence") or [])]:
            if _code(item) == TIME_POINT and "TextValue" in item:
                yield item
