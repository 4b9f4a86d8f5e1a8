"""The patient banner (Qt-free): whose study is open, as every clinical viewer shows it — name (Family, Given),
ID, birth date and age, sex, study date and description, accession number, modality and institution, whatever
the study's headers hold. The desktop's title and header, the Slicer and QuPath panels, the `chat` header and the
session report show it; it is read from the files on this machine and never put in a request to a model.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from copilot.pacs.cache import read_origin
from copilot.pacs.patient import (
    PatientFacts,
    age_on,
    dicom_date,
    folder_facts,
    person_name,
    stored_age,
    study_facts,
    study_label,
)

SEXES = {"M": "male", "F": "female", "O": "other"}
NO_DETAILS = "no patient details in this study's files"
SLIDE_NAMES = "this slide names a patient:"


@dataclass(frozen=True)
class Banner:
    """The banner's text: the patient's name, labelled fields in reading order, and the study's one-line label."""

    patient: str
    fields: list[tuple[str, str]] = field(default_factory=list)
    label: str = ""
    facts: PatientFacts | None = None

    @property
    def line(self) -> str:
        """The whole banner in one line (terminal, window header, report)."""
        return " · ".join([self.patient or NO_DETAILS, *(f"{k} {v}" for k, v in self.fields)])

    @property
    def title(self) -> str:
        """The window title: patient and study (and the series shown), never a folder hash."""
        series = " + ".join(self.facts.series_labels) if self.facts is not None else ""
        return " — ".join(p for p in ("MedCopilot", self.label, series) if p)

    def strings(self) -> list[str]:
        """Every value the banner shows (what a test looks for in the requests to a model)."""
        return [s for s in (self.patient, *(v for _, v in self.fields)) if s]

    def to_html(self) -> str:
        """The banner as a block of the session report."""
        cells = "".join(f"<span><b>{html.escape(k)}</b> {html.escape(v)}</span> " for k, v in self.fields)
        who = html.escape(self.patient or NO_DETAILS)
        return f'<div class="patient-banner"><strong>{who}</strong> {cells}</div>'


BANNER_CSS = (
    ".patient-banner{background:#1d2b3a;color:#fff;padding:8px 12px;border-radius:4px;margin:8px 0}"
    ".patient-banner span{margin-left:14px} .patient-banner b{color:#9cc3ea;font-weight:normal}"
)


def banner_from_facts(facts: PatientFacts | None, fallback: str) -> Banner:
    """The banner of a study's facts (`fallback` names a study without DICOM headers: its file or case)."""
    if facts is None:
        return Banner("", [("Study", fallback)], fallback)
    f = facts
    fields: list[tuple[str, str]] = []
    if f.patient_id:
        fields.append(("ID", f.patient_id))
    if f.birth_date:
        age = age_on(f.birth_date, f.study_date)
        fields.append(("Born", dicom_date(f.birth_date) + (f" ({age})" if age else "")))
    elif f.age:
        fields.append(("Age", stored_age(f.age)))
    if f.sex:
        fields.append(("Sex", SEXES.get(f.sex.upper(), f.sex)))
    study = " ".join(p for p in (dicom_date(f.study_date), f.study_description) if p)
    if study:
        fields.append(("Study", study))
    if f.accession:
        fields.append(("Acc", f.accession))
    if f.modalities:
        fields.append(("Modality", "/".join(f.modalities)))
    if f.institution:
        fields.append(("Institution", f.institution))
    return Banner(person_name(f.name), fields, study_label(f, fallback), f)


def case_name(case: Any) -> str:
    """What a study is called when its headers name no patient: its case id, or for a PACS cache folder (named by
    a hash) the PACS's own word for it."""
    root = Path(getattr(case, "root", "."))
    if read_origin(root) is not None:
        return "study from the PACS"
    return str(getattr(case, "case_id", root.name))


def study_banner(case: Any) -> Banner:
    """The banner of an opened study or case pack (from its headers; a study without them says so)."""
    try:
        facts = study_facts(Path(case.root), dict(getattr(case, "inputs", None) or {}))
    except OSError:  # a folder gone meanwhile: the case's own name
        facts = None
    if facts is None and (named := _slide_named(case)):  # a plain slide whose scanner recorded the case
        what = "; ".join(f"{k} {v}" for k, v in named)
        return Banner(f"{SLIDE_NAMES} {what}", [("Study", case_name(case))], case_name(case))
    return banner_from_facts(facts, case_name(case))


def _slide_named(case: Any) -> list[tuple[str, str]]:
    """What a slide's properties name of its patient or case ([] for anything else, or an unreadable slide)."""
    slide = dict(getattr(case, "inputs", None) or {}).get("slide")
    if not slide:
        return []
    from copilot.panel.identifiers import slide_named

    path = Path(case.root) / str(slide)
    return slide_named(path) if path.is_file() else []


def place_label(path: str | Path) -> str:
    """How a message names a folder or file the clinician opened: a PACS cache folder by its patient and study,
    anything else by its own name."""
    p = Path(path)
    if p.is_dir() and read_origin(p) is not None:
        return study_label(folder_facts(p), "study from the PACS")
    return p.name or str(path)
