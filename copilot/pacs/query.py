"""QIDO-RS study filters from what a clinician types: patient ID and name (QIDO wildcards `*` and `?`),
accession number, study description, modality, and a study date or range as YYYYMMDD or YYYY-MM-DD.

A query carries no escaped character a server must decode where it can be avoided (Orthanc matches `%5E` and
`%20` literally): a name's `^` and spaces become `?`, a description's words are joined by `*`."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import quote

from copilot.errors import HandlerError

_DAY = r"(\d{8}|\d{4}-\d{2}-\d{2})"
_RANGE = re.compile(rf"{_DAY}?\s*(?:(?:-|\.\.|/|\s+to\s+)\s*{_DAY}?)?", re.IGNORECASE)
_UNSAFE = re.compile(r"[\x00-\x1f\x7f\\]")
_KEEP = "*?,-._~:@!$'()/"  # QIDO wildcards travel as they are


def query_string(params: dict[str, Any]) -> str:
    """A QIDO query string: values percent-encoded except the wildcards; a list value repeats its key."""
    pairs = []
    for key, value in params.items():
        for item in value if isinstance(value, list) else [value]:
            pairs.append(f"{quote(str(key), safe=_KEEP)}={quote(str(item), safe=_KEEP)}")
    return "&".join(pairs)


def _day(text: str) -> str:
    compact = text.replace("-", "")
    try:
        dt.datetime.strptime(compact, "%Y%m%d")
    except ValueError:
        raise HandlerError("invalid_query", f"{text!r} is not a calendar date") from None
    return compact


def qido_date(text: str) -> str:
    """A study date or range as QIDO takes it (`YYYYMMDD` or `YYYYMMDD-YYYYMMDD`, either end open)."""
    value = text.strip()
    m = _RANGE.fullmatch(value)
    if not value or m is None or (m.group(1) is None and m.group(2) is None):
        raise HandlerError(
            "invalid_query",
            f"{value[:40]!r} is not a date or range: YYYYMMDD or YYYY-MM-DD, a range as A-B (either end open)",
        )
    start, end = (_day(g) if g else "" for g in m.groups())
    ranged = m.group(0) != (m.group(1) or "") or m.group(2) is not None
    if not ranged:
        return start
    if start and end and start > end:
        raise HandlerError("invalid_query", f"the range {value!r} ends before it starts")
    return f"{start}-{end}"


def _text(value: str, what: str) -> str:
    text = value.strip()
    if not text or len(text) > 64 or _UNSAFE.search(text):
        raise HandlerError("invalid_query", f"{what} must be 1 to 64 printable characters")
    return text


def _contains(value: str, what: str) -> str:
    """A free-text filter: as given when it holds a wildcard, else its words matched anywhere in that order
    (`*word*word*`: a space in a query is one some servers never decode)."""
    text = _text(value, what)
    return text if "*" in text or "?" in text else "*" + "*".join(text.split()) + "*"


def name_forms(typed: str) -> list[str]:
    """The PatientName patterns of a name as people type it, the likeliest first: "Family, Given" and DICOM's
    "Family^Given" as that person name; "Given Family" as typed, then with its last word first (DICOM stores the
    family name first); one word, the names that start with it; the user's own wildcards as given. `^` and spaces
    are sent as `?` (any one character): some servers never decode an escaped one in a query."""
    name = _text(typed, "a patient name")

    def pattern(parts: list[str]) -> str:
        return "?".join(w for part in parts for w in part.split()) + "*"

    if "*" in name or "?" in name:
        return [name.replace("^", "?").replace(" ", "?")]
    if "," in name:
        family, _, given = name.partition(",")
        return [pattern([family, given])]
    words = name.split()
    if "^" in name or len(words) < 2:
        return [name.replace("^", "?").replace(" ", "?") + "*"]
    return [pattern(words), pattern([words[-1], *words[:-1]])]


def study_filters(
    patient_id: str | None = None, modality: str | None = None, date: str | None = None,
    patient_name: str | None = None, accession: str | None = None, description: str | None = None,
) -> dict[str, str]:  # fmt: skip
    """The QIDO-RS attribute filters of a study search."""
    filters: dict[str, str] = {}
    if patient_id:
        filters["PatientID"] = _text(patient_id, "a patient ID")
    if patient_name:
        filters["PatientName"] = name_forms(patient_name)[0]
    if accession:
        filters["AccessionNumber"] = _text(accession, "an accession number").replace(" ", "?")
    if description:
        filters["StudyDescription"] = _contains(description, "a study description")
    if modality:
        filters["ModalitiesInStudy"] = _text(modality, "a modality").upper()
    if date:
        filters["StudyDate"] = qido_date(date)
    return filters
