"""Whose study is open: the patient and study facts of the opened series' DICOM headers (name, ID, birth date,
age, sex, study date and description, accession number, modalities, institution) and the study's identity
(Study, Series and Frame of Reference UIDs) that a store back to the PACS is checked against.

These facts are for the clinician's eyes (the patient banner) and for local checks only; nothing here is ever
part of a request to a model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

MAX_SCAN = 2000  # headers read to find a series' first instance in a folder


@dataclass(frozen=True)
class PatientFacts:
    """What the headers of the opened study say of its patient and study ('' where a header is absent)."""

    name: str = ""  # DICOM person name, as stored (Family^Given^Middle^Prefix^Suffix)
    patient_id: str = ""
    birth_date: str = ""  # YYYYMMDD
    age: str = ""  # PatientAge as stored (e.g. 063Y)
    sex: str = ""
    study_date: str = ""  # YYYYMMDD
    study_description: str = ""
    accession: str = ""
    modalities: tuple[str, ...] = ()
    institution: str = ""
    study_uid: str = ""
    series_uids: tuple[str, ...] = ()
    frames: tuple[str, ...] = ()
    series_labels: tuple[str, ...] = ()  # '#2 Thorax 1.0 B31f' per opened series


def _text(ds: Any, keyword: str) -> str:
    value = getattr(ds, keyword, None)
    return "" if value is None else str(value).strip()


def facts_from_headers(headers: list[Any]) -> PatientFacts | None:
    """The facts of one study from the first header of each opened series (None when there is none)."""
    if not headers:
        return None
    first = headers[0]
    modalities = tuple(dict.fromkeys(m for ds in headers if (m := _text(ds, "Modality"))))
    return PatientFacts(
        name=_text(first, "PatientName"), patient_id=_text(first, "PatientID"),
        birth_date=_text(first, "PatientBirthDate"), age=_text(first, "PatientAge"), sex=_text(first, "PatientSex"),
        study_date=_text(first, "StudyDate"), study_description=_text(first, "StudyDescription"),
        accession=_text(first, "AccessionNumber"), modalities=modalities, institution=_text(first, "InstitutionName"),
        study_uid=_text(first, "StudyInstanceUID"),
        series_uids=tuple(dict.fromkeys(u for ds in headers if (u := _text(ds, "SeriesInstanceUID")))),
        frames=tuple(dict.fromkeys(u for ds in headers if (u := _text(ds, "FrameOfReferenceUID")))),
        series_labels=tuple(_series_label(ds) for ds in headers),
    )  # fmt: skip


def _series_label(ds: Any) -> str:
    number = _text(ds, "SeriesNumber")
    return f"{'#' + number + ' ' if number else ''}{_text(ds, 'SeriesDescription') or '(no description)'}"


def _header(path: Path) -> Any:
    import pydicom

    try:
        return pydicom.dcmread(path, stop_before_pixels=True)
    except Exception:  # not a DICOM file
        return None


def first_header(folder: Path, series_uid: str | None = None) -> Any:
    """The first DICOM header in a folder (of `series_uid` when given; sub-folders searched too), or None."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "hidden" and not d.startswith("."))
        for name in sorted(filenames):
            if seen >= MAX_SCAN:
                return None
            ds = _header(Path(dirpath) / name)
            seen += 1
            if ds is not None and (series_uid is None or _text(ds, "SeriesInstanceUID") == series_uid):
                return ds
    return None


def study_facts(root: str | Path, inputs: dict[str, Any] | None) -> PatientFacts | None:
    """The facts of the study a session opens (its case root and inputs), or None when it is not DICOM."""
    root = Path(root)
    inputs = dict(inputs or {})
    uids: list[str | None] = list(inputs.get("series_uids") or [inputs.get("series_uid")])
    headers = []
    paths = [str(p) for p in inputs.get("volumes", [])] or ([str(inputs["slide"])] if inputs.get("slide") else [])
    for n, rel in enumerate(paths):
        p = root / rel
        ds = first_header(p, uids[n] if n < len(uids) else None) if p.is_dir() else _header(p) if p.is_file() else None
        if ds is not None:
            headers.append(ds)
    return facts_from_headers(headers)


def folder_facts(folder: str | Path) -> PatientFacts | None:
    """The facts of the first DICOM series under a folder (a PACS cache folder named by a hash, for its label)."""
    ds = first_header(Path(folder))
    return facts_from_headers([ds]) if ds is not None else None


def person_name(value: str) -> str:
    """A DICOM person name as a clinician reads it: 'FAMILY, Given Middle' (prefix and suffix around it)."""
    parts = [p.strip() for p in value.split("=")[0].split("^")]
    parts += [""] * (5 - len(parts))
    family, given, middle, prefix, suffix = parts[:5]
    first = " ".join(p for p in (given, middle) if p)
    name = f"{family}, {first}" if family and first else family or first
    return " ".join(p for p in (prefix, name, suffix) if p)


def dicom_date(value: str) -> str:
    """YYYYMMDD → YYYY-MM-DD (anything else as it is)."""
    v = value.strip()
    return f"{v[:4]}-{v[4:6]}-{v[6:8]}" if len(v) == 8 and v.isdigit() else v


def age_on(birth: str, on: str) -> str:
    """Whole years between two DICOM dates ('' when either is unreadable)."""
    try:
        b = date(int(birth[:4]), int(birth[4:6]), int(birth[6:8]))
        d = date(int(on[:4]), int(on[4:6]), int(on[6:8])) if on else date.today()
    except (ValueError, IndexError):
        return ""
    years = d.year - b.year - ((d.month, d.day) < (b.month, b.day))
    return f"{years} y" if years >= 0 else ""


def stored_age(value: str) -> str:
    """A DICOM age string (063Y, 014M, 003W, 005D) as '63 y', '14 mo', '3 wk', '5 d'."""
    units = {"Y": "y", "M": "mo", "W": "wk", "D": "d"}
    v = value.strip().upper()
    if len(v) == 4 and v[:3].isdigit() and v[3] in units:
        return f"{int(v[:3])} {units[v[3]]}"
    return v


def study_label(facts: PatientFacts | None, fallback: str) -> str:
    """A study named by its patient and study (name, study description, date), never by a folder hash."""
    if facts is None:
        return fallback
    who = person_name(facts.name) or (f"ID {facts.patient_id}" if facts.patient_id else "")
    what = " ".join(p for p in (facts.study_description, dicom_date(facts.study_date)) if p)
    return " — ".join(p for p in (who, what) if p) or fallback


def study_identity(root: str | Path, inputs: dict[str, Any] | None) -> dict[str, Any]:
    """The UIDs of the study a session shows: its opened series, and beside them in a PACS cache folder the other
    retrieved series of the same study (one header each); what a store back to the PACS must match."""
    from copilot.pacs.cache import ORIGIN_FILE

    root = Path(root)
    opened = study_facts(root, inputs)
    headers = []
    for origin in sorted(root.glob(f"*/{ORIGIN_FILE}")) + sorted(root.glob(ORIGIN_FILE)):
        ds = first_header(origin.parent)
        if ds is not None:
            headers.append(ds)
    cached = facts_from_headers(headers)
    series = [*(opened.series_uids if opened else ()), *(cached.series_uids if cached else ())]
    frames = [*(opened.frames if opened else ()), *(cached.frames if cached else ())]
    study = opened.study_uid if opened is not None else cached.study_uid if cached is not None else ""
    return {"study": study, "series": list(dict.fromkeys(series)), "frames": list(dict.fromkeys(frames))}
