"""The ways a clinician may type an identifier of the open study: each word of a name or an institution, an ID
with or without its separators, and a date in the common formats (20210303, 2021-03-03, 03/03/2021, 3/3/2021,
03.03.2021, 3 March 2021, March 3, 2021, 3rd of Mar 2021 …). Study mode removes every spelling from what is sent.

Words of names are not scrubbed on their own when they are shorter than three letters or common words
(`resources/common_words.txt`: English words a question needs, and the generic words of institution names such
as "General", "Memorial", "Hospital"); they are still removed as part of the whole name or institution.
"""

from __future__ import annotations

import functools
import re

from copilot.resources import resources_dir

NAME_KEYS = frozenset({
    "PatientName", "OtherPatientNames", "PatientMotherBirthName", "ReferringPhysicianName", "PerformingPhysicianName",
    "NameOfPhysiciansReadingStudy", "PhysiciansOfRecord", "RequestingPhysician", "OperatorsName", "InstitutionName",
    "InstitutionAddress", "InstitutionalDepartmentName", "PatientAddress",
})  # fmt: skip
ID_KEYS = frozenset({
    "PatientID", "OtherPatientIDs", "AccessionNumber", "StudyID", "RequestedProcedureID", "ScheduledProcedureStepID",
    "PerformedProcedureStepID", "DeviceSerialNumber",
})  # fmt: skip
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")  # fmt: skip
NAME_WORD_MIN = 3
DATE = re.compile(r"^(\d{4})[:.\-/]?(\d{2})[:.\-/]?(\d{2})")
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?", re.UNICODE)
_SEPARATORS = re.compile(r"[\s\-_/.:^]+")


@functools.cache
def common_words() -> frozenset[str]:
    """Lower-case words never scrubbed on their own (see the module docstring)."""
    text = (resources_dir() / "common_words.txt").read_text(encoding="utf-8")
    return frozenset(w.strip().lower() for line in text.splitlines() if not line.startswith("#") for w in line.split())


def name_words(value: str) -> set[str]:
    """The words of a name, address or institution that identify on their own (long enough, not common)."""
    words = {w for w in _WORD.findall(value.replace("^", " "))}
    return {w for w in words if len(w) >= NAME_WORD_MIN and w.lower() not in common_words()}


def id_forms(value: str) -> set[str]:
    """An ID as typed: as stored, without separators, with spaces for them, and each part holding four or more
    digits (the number of 'MRN-7734921')."""
    parts = [p for p in _SEPARATORS.split(value.strip()) if p]
    out = {value.strip(), "".join(parts), " ".join(parts)}
    out |= {p for p in parts if sum(c.isdigit() for c in p) >= 4}
    return out


def date_forms(value: str) -> set[str]:
    """A date (YYYYMMDD first, as DICOM and TIFF write it) in the formats people type; empty when not a date."""
    m = DATE.match(value.strip())
    if not m:
        return set()
    y, mo, d = m.groups()
    month, day = int(mo), int(d)
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return set()
    out = {f"{y}{mo}{d}"}
    for sep in "-/.":
        out |= {f"{y}{sep}{mo}{sep}{d}", f"{y}{sep}{month}{sep}{day}"}
        for a, b in ((d, mo), (mo, d), (str(day), str(month)), (str(month), str(day))):
            out |= {f"{a}{sep}{b}{sep}{y}", f"{a}{sep}{b}{sep}{y[2:]}"}
    suffix = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    for name in {MONTHS[month - 1], MONTHS[month - 1][:3], MONTHS[month - 1][:4]}:
        for dd in (str(day), d, f"{day}{suffix}"):
            out |= {f"{dd} {name} {y}", f"{dd} of {name} {y}", f"{name} {dd} {y}", f"{name} {dd}, {y}",
                    f"{dd} {name}, {y}", f"{dd}-{name}-{y}"}  # fmt: skip
    return out


def spellings(key: str, value: str) -> set[str]:
    """Every spelling of one identifier value of the header field `key` ('' for slide properties)."""
    value = value.strip()
    out = {value} | date_forms(value)
    if "^" in value:
        parts = [p.strip() for p in value.split("^") if p.strip()]
        out |= {" ".join(parts), " ".join(reversed(parts)), ", ".join(parts)}
    if key in NAME_KEYS or "^" in value:
        out |= name_words(value)
    if key in ID_KEYS:
        out |= id_forms(value)
    return out


def flexible(identifier: str) -> str:
    """A regular expression of one spelling that also matches other spacing, an optional comma or full stop
    after a word, and any dash or slash in place of another ('March 3 2021', 'Nov. 23, 1958')."""
    out = []
    for ch in identifier:
        if ch.isspace():
            out.append(r"\.?,?\s+")
        elif ch == ",":
            out.append(r",?")
        elif ch in "-/.":
            out.append(r"[\-/.]")
        else:
            out.append(re.escape(ch))
    return "".join(out)
