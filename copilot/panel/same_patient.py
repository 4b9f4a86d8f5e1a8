"""Is it the same patient? A prior or a second study opened beside the open one is compared with it by patient ID,
name and birth date (as the banner reads them, compared folded: case, accents, umlauts spelt out, separators of
an ID and the order of the name's parts do not matter). A mismatch is refused unless the clinician, shown both
patients side by side, accepts it; the check and the answer are traced (which fields differ, never their values).
The pane captions name each study by its date and description ("PRIOR 2024-08-12 · 6 months earlier · CT").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from copilot.pacs.patient import PatientFacts, dicom_date
from copilot.panel.banner import banner_from_facts
from copilot.panel.folding import fold, transliterations


class OtherPatient(ValueError):
    """A study of another patient that the clinician did not accept beside the open one."""


@dataclass(frozen=True)
class Mismatch:
    """What differs between the open study's patient and another study's (field names only), and both banners."""

    differs: tuple[str, ...]
    current: str
    other: str

    def side_by_side(self, other_role: str = "prior") -> str:
        """What the dialog shows: both patients, one line each, and what differs."""
        return (
            f"The {other_role} is of another patient ({', '.join(self.differs)} differ).\n\n"
            f"Open study:  {self.current}\n{other_role.capitalize()}:  {self.other}\n\n"
            f"Show the {other_role} beside the open study anyway?"
        )


def _id(value: str) -> str:
    return "".join(c for c in fold(value) if c.isalnum())


def _name(value: str) -> frozenset[str]:
    """A person name as a set of folded words (parts in any order, umlauts spelt out read as dropped)."""
    words = set()
    for part in value.split("=")[0].replace("^", " ").replace(",", " ").split():
        plain = fold(part)
        spelt = {fold(t) for t in transliterations(part)} | {plain}
        words.add(min(spelt, key=len))  # 'mueller', 'müller' and 'muller' all read 'muller'
    return frozenset(w for w in words if w)


def differences(current: PatientFacts | None, other: PatientFacts | None) -> tuple[str, ...]:
    """The patient fields that differ ('' of a field in one study only counts as differing; absent in both does
    not): patient ID, name, birth date."""
    a, b = current or PatientFacts(), other or PatientFacts()
    out = []
    for label, left, right in (("patient ID", _id(a.patient_id), _id(b.patient_id)),
                               ("name", _name(a.name), _name(b.name)),
                               ("birth date", a.birth_date.strip(), b.birth_date.strip())):  # fmt: skip
        if (left or right) and left != right:
            out.append(label)
    return tuple(out)


def mismatch(current: PatientFacts | None, other: PatientFacts | None) -> Mismatch | None:
    """The mismatch between the open study's patient and another study's, or None when they are the same."""
    differs = differences(current, other)
    if not differs:
        return None
    return Mismatch(differs, banner_from_facts(current, "no patient details").line,
                    banner_from_facts(other, "no patient details").line)  # fmt: skip


def series_mismatch(series: Any) -> Mismatch | None:
    """Whether the series chosen to open together are of different patients (each compared with the first by
    its first header), or None (one series, or all of one patient)."""
    from copilot.pacs.patient import facts_from_headers, first_header

    chosen = list(series) if isinstance(series, list | tuple) else [series]
    facts = [facts_from_headers([ds]) if (ds := first_header(s.folder, s.uid)) is not None else None for s in chosen]
    for other in facts[1:]:
        found = mismatch(facts[0], other)
        if found is not None:
            return found
    return None


def check_patient(
    session: Any, current: PatientFacts | None, other: PatientFacts | None, role: str,
    accept: Callable[[Mismatch], bool] | None,
) -> None:  # fmt: skip
    """Check another study (`role`: prior, second series …) against the open one before it is shown: raise
    OtherPatient when it is of another patient and `accept` (the clinician's dialog) is missing or says no.
    The check is traced in the open study's session as `patient_check` (fields that differ, the decision)."""
    found = mismatch(current, other)
    if found is None:
        session.note("patient_check", {"with": role, "same_patient": True})
        return
    accepted = bool(accept(found)) if accept is not None else False
    decision = "accepted by the clinician" if accepted else "refused"
    session.note("patient_check", {"with": role, "same_patient": False, "differs": list(found.differs),
                                   "decision": decision})  # fmt: skip
    if not accepted:
        raise OtherPatient(f"the {role} is of another patient ({', '.join(found.differs)} differ); it was not opened")


def _day(value: str) -> date | None:
    v = value.strip()
    try:
        return date(int(v[:4]), int(v[4:6]), int(v[6:8])) if len(v) >= 8 and v[:8].isdigit() else None
    except ValueError:
        return None


def interval(current_date: str, other_date: str) -> str:
    """How long before (or after) the open study another was made: '12 days earlier', '6 months earlier',
    '3 years later', 'same day'; '' when a date is missing."""
    a, b = _day(current_date), _day(other_date)
    if a is None or b is None:
        return ""
    if a == b:
        return "same day"
    early, late = (b, a) if b < a else (a, b)
    word = "earlier" if b < a else "later"
    months = (late.year - early.year) * 12 + late.month - early.month - (late.day < early.day)
    if months < 1:
        n, unit = (late - early).days, "day"
    elif months < 24:
        n, unit = months, "month"
    else:
        n, unit = months // 12, "year"
    return f"{n} {unit}{'s' if n != 1 else ''} {word}"


def caption(facts: PatientFacts | None, role: str = "", current: PatientFacts | None = None) -> str:
    """A pane's caption: its study's date and description, for a prior with how much earlier it was made
    ('PRIOR 2024-08-12 · 6 months earlier · CT Thorax')."""
    f = facts or PatientFacts()
    when = dicom_date(f.study_date)
    parts = [" ".join(p for p in (role.upper(), when) if p)]
    if current is not None:
        parts.append(interval(current.study_date, f.study_date))
    parts.append(f.study_description)
    return " · ".join(p for p in parts if p)
