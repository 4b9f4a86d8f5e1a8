"""The ways a clinician may type an identifier of the open study: each word of a name or an institution, an ID
with or without its separators, and a date in the common formats (20210303, 2021-03-03, 03/03/2021, 3/3/2021,
03.03.2021, 3 March 2021, March 3, 2021, 3rd of Mar 2021, third of March 21 …), a name also with its umlauts spelt
out or dropped (Müller, Mueller, Muller). Study mode removes every spelling from what is sent, compared on folded
text (`copilot.panel.folding`: case, accents, full-width forms and look-alike letters do not matter) and with
separators ignored (`flexible`).

Words of names are not scrubbed on their own when they are shorter than three letters or common words
(`resources/common_words.txt`: English words a question needs, and the generic words of institution names such
as "General", "Memorial", "Hospital"); they are still removed as part of the whole name or institution.
"""

from __future__ import annotations

import functools
import re

from copilot.panel.folding import fold, transliterations
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
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_SEP = r"[\s,.\-/:'’^_]"
_INNER = r"[\s\-/_]"


@functools.cache
def common_words() -> frozenset[str]:
    """Lower-case words never scrubbed on their own (see the module docstring)."""
    text = (resources_dir() / "common_words.txt").read_text(encoding="utf-8")
    return frozenset(w.strip().lower() for line in text.splitlines() if not line.startswith("#") for w in line.split())


def name_words(value: str) -> set[str]:
    """The words of a name, address or institution that identify on their own (long enough, not common)."""
    words = {w for w in _WORD.findall(value.replace("^", " "))}
    return {w for w in words if len(w) >= NAME_WORD_MIN and fold(w) not in common_words()}


def id_forms(value: str) -> set[str]:
    """An ID as typed: as stored, without separators, with spaces for them, and each part holding four or more
    digits (the number of 'MRN-7734921')."""
    parts = [p for p in _SEPARATORS.split(value.strip()) if p]
    out = {value.strip(), "".join(parts), " ".join(parts)}
    out |= {p for p in parts if sum(c.isdigit() for c in p) >= 4}
    return out


ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
            "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth", "eighteenth",
            "nineteenth", "twentieth", "twenty-first", "twenty-second", "twenty-third", "twenty-fourth",
            "twenty-fifth", "twenty-sixth", "twenty-seventh", "twenty-eighth", "twenty-ninth", "thirtieth",
            "thirty-first")  # fmt: skip


def date_forms(value: str) -> set[str]:
    """A date (YYYYMMDD first, as DICOM and TIFF write it) in the formats people type: numeric in every order
    with padded or unpadded day and month and four- or two-digit years, month names (full, three and four
    letters) with the day as a number, an ordinal ('3rd') or a word ('third'); empty when not a date. Matching
    (`flexible`) lets any spacing, comma, dash, slash or full stop stand between the parts."""
    m = DATE.match(value.strip())
    if not m:
        return set()
    y, mo, d = m.groups()
    month, day = int(mo), int(d)
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return set()
    out = {f"{y}{mo}{d}"}
    for mm, dd in ((mo, d), (str(month), str(day)), (mo, str(day)), (str(month), d)):
        out.add(f"{y}-{mm}-{dd}")
        for year in (y, y[2:]):
            out |= {f"{dd}-{mm}-{year}", f"{mm}-{dd}-{year}"}
    suffix = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    days = (str(day), d, f"{day}{suffix}", ORDINALS[day - 1])
    for name in {MONTHS[month - 1], MONTHS[month - 1][:3], MONTHS[month - 1][:4]}:
        for dd in days:
            for year in (y, y[2:]):
                out |= {f"{dd} {name} {year}", f"{dd} of {name} {year}", f"{name} {dd} {year}",
                        f"{name} the {dd} {year}", f"{year} {name} {dd}"}  # fmt: skip
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
    if not value.isascii() or key in NAME_KEYS or "^" in value:  # Müller also as Mueller and Muller
        out |= {t for v in out for t in transliterations(v) if len(t) >= NAME_WORD_MIN and t not in common_words()}
    return out


def flexible(identifier: str) -> str:
    """A regular expression of one folded spelling (`copilot.panel.folding.fold`) that ignores how its parts are
    separated: between words any spacing, comma, dash, slash, full stop, apostrophe or none (names joined:
    'johnathanquixley'); between two numbers at least one of those ('3.3.61', never '33.61'); inside a part
    holding a digit (an ID, an accession, a date) spaces, dashes, slashes or underscores ('773 4921',
    'ACC-2024-0917X'), never a full stop or comma (a measurement such as 44.71 stays)."""
    tokens = _TOKEN.findall(identifier)
    out: list[str] = []
    for n, tok in enumerate(tokens):
        if n:
            both_numbers = tokens[n - 1].isdigit() and tok.isdigit()
            out.append(f"{_SEP}+" if both_numbers else f"{_SEP}*")
        if len(tok) >= 4 and any(c.isdigit() for c in tok):  # never a full stop or comma inside: '44.71' is a number
            out.append(f"{_INNER}*".join(re.escape(c) for c in tok))
        else:
            out.append(re.escape(tok))
    return "".join(out)
