"""A stored measurement report (DICOM SR, TID 1500) as a list the clinician reads and jumps from (Qt-free): each
measurement group's finding by its tracking identifier — a point, a distance with its length, a key slice, a
measured value — and the report's text (request, findings). Coordinates are read back from the report's patient
coordinates (LPS) into RAS; a key slice is placed at the centre of the image it names, from the report's own image
library. A file that is no structured report is refused by name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pydicom

MAX_ITEMS = 2000  # a report listing more is cut (said in its last line)


@dataclass(frozen=True)
class ReportItem:
    """One line of the report panel and where a click on it goes (None: text only)."""

    kind: str  # point | distance | key_slice | measurement | text
    text: str
    ras: tuple[float, float, float] | None = None


def _name(item: Any) -> str:
    seq = item.get("ConceptNameCodeSequence")
    return str(seq[0].CodeMeaning) if seq else ""


def _ras(lps: list[float]) -> tuple[float, float, float]:
    return (-float(lps[0]), -float(lps[1]), float(lps[2]))


def _mm(ras: tuple[float, float, float]) -> str:
    return " ".join(f"{axis} {value:.1f}" for axis, value in zip("RAS", ras, strict=True)) + " mm"


def _children(item: Any) -> list[Any]:
    return list(item.get("ContentSequence") or [])


def _walk(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for it in items:
        out.append(it)
        out.extend(_walk(_children(it)))
    return out


def _library(root: Any) -> dict[str, tuple[float, float, float]]:
    """SOP instance UID → the RAS centre of that image, from the image library's acquisition context."""
    centres: dict[str, tuple[float, float, float]] = {}
    for it in _walk(_children(root)):
        if it.get("ValueType") != "IMAGE" or _name(it) != "Source" or not it.get("ReferencedSOPSequence"):
            continue
        facts = {_name(c): float(c.MeasuredValueSequence[0].NumericValue) for c in _children(it)
                 if c.get("ValueType") == "NUM" and c.get("MeasuredValueSequence")}  # fmt: skip
        try:
            ipp = np.array([facts[f"Image Position (Patient) {a}"] for a in "XYZ"])
            row = np.array([facts[f"Image Orientation (Patient) Row {a}"] for a in "XYZ"])
            col = np.array([facts[f"Image Orientation (Patient) Column {a}"] for a in "XYZ"])
            rows, cols = facts["Pixel Data Rows"], facts["Pixel Data Columns"]
            dx, dy = facts["Horizontal Pixel Spacing"], facts["Vertical Pixel Spacing"]
        except KeyError:
            continue
        centre = ipp + row * dx * (cols - 1) / 2.0 + col * dy * (rows - 1) / 2.0
        centres[str(it.ReferencedSOPSequence[0].ReferencedSOPInstanceUID)] = _ras(centre.tolist())
    return centres


SHAPE_WORDS = {"POLYLINE": "angle", "ELLIPSE": "ellipse", "ELLIPSOID": "sphere", "POLYGON": "outline"}


def _derivation(num: Any) -> str:
    """A NUM item's derivation as a word before its name (`Maximum SUVbw`), '' when it has none."""
    found = [str(c.ConceptCodeSequence[0].CodeMeaning) for c in _children(num)
             if _name(c) == "Derivation" and c.get("ConceptCodeSequence")]  # fmt: skip
    return f"{found[0]} " if found else ""


def _group(group: Any, library: dict[str, tuple[float, float, float]]) -> ReportItem | None:
    parts = _children(group)
    label = next((str(c.TextValue) for c in parts if _name(c) == "Tracking Identifier" and "TextValue" in c), "")
    label = label or "finding"
    nums = [c for c in parts if c.get("ValueType") == "NUM" and c.get("MeasuredValueSequence")]
    values = "; ".join(f"{_derivation(n)}{_name(n)} {float(n.MeasuredValueSequence[0].NumericValue):g} "
                       f"{n.MeasuredValueSequence[0].MeasurementUnitsCodeSequence[0].CodeValue}" for n in nums)
    shape = next((c for c in _walk(parts) if c.get("ValueType") == "SCOORD3D"), None)
    if shape is not None:
        data = [float(v) for v in shape.GraphicData]
        if shape.GraphicType == "POINT" and len(data) >= 3:
            at = _ras(data[:3])
            return ReportItem("point", f"point: {label}  {_mm(at)}" + (f"  ({values})" if values else ""), at)
        two_point_line = shape.GraphicType == "POLYLINE" and len(data) == 6  # a distance, below
        word = None if two_point_line else SHAPE_WORDS.get(str(shape.GraphicType))
        if word and len(data) >= 6:  # an angle, an ellipse, a sphere: at its centre
            at = _ras(list(np.asarray(data, dtype=float).reshape(-1, 3).mean(axis=0)))
            return ReportItem("measurement", f"{word}: {label}  {values or _mm(at)}", at)
        if len(data) >= 6:
            a, b = _ras(data[:3]), _ras(data[3:6])
            length = values or f"Length {float(np.linalg.norm(np.subtract(a, b))):.1f} mm"
            return ReportItem("distance", f"distance: {label}  {length}", a)
    image = next((c for c in parts if c.get("ValueType") == "IMAGE" and c.get("ReferencedSOPSequence")), None)
    if image is not None:
        centre = library.get(str(image.ReferencedSOPSequence[0].ReferencedSOPInstanceUID))
        where = f"  S {centre[2]:.1f} mm" if centre is not None else "  (image not in the report's library)"
        return ReportItem("key_slice", f"key slice: {label}{where}" + (f"  ({values})" if values else ""), centre)
    if values:
        return ReportItem("measurement", f"measurement: {label}  {values}")
    return None


def report_items(path: str | Path) -> list[ReportItem]:
    """The report's findings, then its text, in document order; ValueError when the file is no structured report."""
    try:
        ds = pydicom.dcmread(str(path))
    except Exception as exc:  # not DICOM at all
        raise ValueError(f"{Path(path).name} is not a DICOM file: {exc}") from exc
    if str(getattr(ds, "Modality", "")) != "SR" or "ContentSequence" not in ds:
        raise ValueError(f"{Path(path).name} is not a structured report (modality {getattr(ds, 'Modality', '?')})")
    library = _library(ds)
    found: list[ReportItem] = []
    texts: list[ReportItem] = []
    for it in _walk(_children(ds)):
        if len(found) + len(texts) >= MAX_ITEMS:
            texts.append(ReportItem("text", f"… the report lists more than {MAX_ITEMS} items"))
            break
        if it.get("ValueType") == "CONTAINER" and _name(it) == "Measurement Group":
            item = _group(it, library)
            if item is not None:
                found.append(item)
        elif it.get("ValueType") == "TEXT" and _name(it) in ("Finding", "Request", "Impression", "Comment"):
            texts.append(ReportItem("text", f"{_name(it)}: {it.TextValue}"))
    return found + texts


def report_title(path: str | Path) -> str:
    """The report's series description and date, for the panel's heading."""
    ds = pydicom.dcmread(str(path), stop_before_pixels=True)
    desc = str(getattr(ds, "SeriesDescription", "") or "measurement report")
    date = str(getattr(ds, "ContentDate", "") or "")
    return f"SR {desc}" + (f" · {date[:4]}-{date[4:6]}-{date[6:8]}" if len(date) == 8 else "")
