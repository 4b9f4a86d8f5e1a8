"""The identifiers a study's own files carry: every DICOM header of the opened series (patient name and its
parts, ID, birth date, age, accession number, institution, physicians, operators, station, study and series
UIDs, dates and times), the text properties of a slide that name people, dates or files, and the study's
paths; each in the spellings a clinician may type (`copilot.panel.spellings`). Study mode removes them from
every request to a model; the session report marks where they occur.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from copilot.engine.slide.identity import identifying_properties, names_an_identifier, value_parts
from copilot.engine.volume.headers import is_dicom
from copilot.kinds import viewer_kind
from copilot.panel.folding import fold
from copilot.panel.spellings import spellings
from copilot.panel.studies import dicom_series

MIN_LENGTH = 3  # shorter values (a sex letter, a one-digit number) cannot be told from ordinary text; never sent
MAX_HEADERS = 400  # headers read per series (UIDs of every instance); the rest share patient and study tags
MAX_CACHED_SERIES = 2000  # cached series looked at for the patient's other exams (one header each)
EXAM_DATES = ("StudyDate", "SeriesDate", "AcquisitionDate", "ContentDate")

DICOM_IDENTIFIERS = (
    "PatientName", "PatientID", "PatientBirthDate", "PatientBirthTime", "PatientAge", "PatientAddress",
    "PatientTelephoneNumbers", "OtherPatientIDs", "OtherPatientNames", "PatientMotherBirthName",
    "MilitaryRank", "EthnicGroup", "AccessionNumber", "InstitutionName", "InstitutionAddress",
    "InstitutionalDepartmentName", "ReferringPhysicianName", "ReferringPhysicianAddress", "PerformingPhysicianName",
    "NameOfPhysiciansReadingStudy", "PhysiciansOfRecord", "RequestingPhysician", "OperatorsName", "StationName",
    "DeviceSerialNumber", "StudyID", "StudyInstanceUID", "SeriesInstanceUID", "SOPInstanceUID",
    "FrameOfReferenceUID", "StudyDate", "SeriesDate", "AcquisitionDate", "ContentDate", "InstanceCreationDate",
    "AcquisitionDateTime", "StudyTime", "SeriesTime", "AcquisitionTime", "ContentTime", "IssuerOfPatientID",
    "RequestedProcedureID", "ScheduledProcedureStepID", "PerformedProcedureStepID",
)  # fmt: skip
PERSON_KEY = re.compile(r"(?i)(name|patient|user|operator|physician|artist)")


def _variants(value: str, key: str = "") -> set[str]:
    """A value as it may be written (`copilot.panel.spellings`): as stored, its name parts and words, an ID's
    forms, a date in the common formats; only those long enough to tell from ordinary text."""
    return {v for v in spellings(key, value) if len(v) >= MIN_LENGTH}


def dicom_identifiers(files: Iterable[Path]) -> set[str]:
    """Identifier strings of the given DICOM files (headers only), with the dates of the patient's other exams in
    the PACS cache."""
    import pydicom

    found: set[str] = set()
    patients: set[str] = set()
    for n, f in enumerate(files):
        if n >= MAX_HEADERS:
            break
        try:
            ds = pydicom.dcmread(f, stop_before_pixels=True)
        except Exception:  # not a DICOM file among the series' neighbours
            continue
        if str(getattr(ds, "PatientID", "") or "").strip():
            patients.add(id_key(str(ds.PatientID)))
        for key in DICOM_IDENTIFIERS:
            value = getattr(ds, key, None)
            if value in (None, ""):
                continue
            values = value if isinstance(value, list | tuple) or type(value).__name__ == "MultiValue" else [value]
            for v in values:
                found |= _variants(str(v), key)
    return found | other_exam_dates(patients)


def id_key(value: str) -> str:
    """A patient ID as compared: folded, separators left out."""
    return "".join(c for c in fold(value) if c.isalnum())


def other_exam_dates(patients: set[str], cache_root: Path | None = None) -> set[str]:
    """The dates (study, series, acquisition, content) of every cached exam of these patients, in every spelling:
    a date typed of an earlier exam names the patient as well as the open one's does."""
    if not patients:
        return set()
    import pydicom

    from copilot.pacs.cache import PacsCache

    found: set[str] = set()
    for n, folder in enumerate(sorted(PacsCache(cache_root).series_dirs())):
        if n >= MAX_CACHED_SERIES:
            break
        first = next((f for f in sorted(folder.iterdir()) if f.suffix == ".dcm"), None)
        try:
            ds = pydicom.dcmread(first, stop_before_pixels=True) if first is not None else None
        except Exception:  # a damaged cached file: no dates to add
            continue
        if ds is None or id_key(str(getattr(ds, "PatientID", "") or "")) not in patients:
            continue
        for key in EXAM_DATES:
            value = str(getattr(ds, key, "") or "")
            if value:
                found |= _variants(value, key)
    return found


def _slide_properties(path: Path) -> dict[str, str]:
    try:
        import openslide

        with openslide.OpenSlide(str(path)) as slide:
            return {str(k): str(v) for k, v in slide.properties.items() if v is not None}
    except Exception:  # not an OpenSlide format: tiffslide reads the TIFF tags
        pass
    try:
        import tiffslide

        with tiffslide.TiffSlide(str(path)) as slide:
            return {str(k): str(v) for k, v in slide.properties.items() if v is not None}
    except Exception:  # an unreadable property table: nothing to add
        return {}


def slide_identifiers(path: Path) -> set[str]:
    """Identifier strings of a slide: the values of properties and description fields that name the patient,
    the case, files, people, dates, barcodes or labels (`copilot.engine.slide.identity`), with their parts
    (the case number a barcode starts with), and the file's name when it holds one of them."""
    props = _slide_properties(path)
    found: set[str] = set()
    for key, value in identifying_properties(props).items():
        short = key.rsplit(".", 1)[-1]
        person = bool(PERSON_KEY.search(short)) and not any(c.isdigit() for c in value)
        for part in value_parts(value) | {value}:
            found |= _variants(part, "PatientName" if person else "AccessionNumber")
    if names_an_identifier(path.stem, props):
        found |= _variants(path.stem, "AccessionNumber") | _variants(path.name)
    if path.suffix.lower() == ".dcm":
        found |= dicom_identifiers([path])
    return found


def slide_named(path: Path) -> list[tuple[str, str]]:
    """What a slide's scanner recorded of its patient or case (for the banner): (property, value) pairs, dates
    and times left out."""
    out = []
    for key, value in identifying_properties(_slide_properties(path)).items():
        short = key.rsplit("[", 1)[-1].rstrip("]").rsplit(".", 1)[-1]
        if not re.search(r"(?i)(date|time)", short):
            out.append((short, value))
    return out[:8]


def study_identifiers(root: Path, inputs: dict[str, Any], kind: str) -> set[str]:
    """Everything identifying that a study's own files say about it, plus its folder and file names."""
    root = Path(root)
    found: set[str] = {str(root), str(root.resolve())}
    if viewer_kind(kind).slide_coordinates:
        slide = root / str(inputs.get("slide", ""))
        if slide.is_file():
            found |= slide_identifiers(slide)
        return {v for v in found if len(v) >= MIN_LENGTH}
    for rel in inputs.get("volumes", []):
        p = (root / str(rel)).resolve()
        if p.is_file() and (p.suffix.lower() == ".dcm" or is_dicom(p)):
            found |= dicom_identifiers([p])
        elif p.is_dir():
            uid = inputs.get("series_uid")
            for series in dicom_series(p):
                if uid is None or series.uid == uid:
                    found |= dicom_identifiers(sorted(series.folder.iterdir()))
    return {v for v in found if len(v) >= MIN_LENGTH}


def removal_notice(policy: Any, text: str) -> str:
    """What the clinician is told when their question names the open study's patient, institution, IDs or dates:
    those words (as typed) are removed before it is sent; '' when nothing is (or the policy sends nothing)."""
    redactor = getattr(policy, "redactor", None)
    found = redactor.found_in(text) if redactor is not None and hasattr(redactor, "found_in") else []
    if not found:
        return ""
    return f"removed from your question before it was sent (identifiers of this study): {', '.join(found)}"


FACT_KEYS = (("name", "PatientName"), ("patient_id", "PatientID"), ("birth_date", "PatientBirthDate"),
             ("accession", "AccessionNumber"), ("institution", "InstitutionName"), ("study_date", "StudyDate"),
             ("study_uid", "StudyInstanceUID"))  # fmt: skip


def facts_identifiers(facts: Any) -> set[str]:
    """The identifiers a patient banner's facts name (`copilot.pacs.patient.PatientFacts`), in every spelling:
    what a host panel removes from requests when it has the banner but not the study's files."""
    if facts is None:
        return set()
    found: set[str] = set()
    for attr, key in FACT_KEYS:
        value = str(getattr(facts, attr, "") or "")
        if value:
            found |= _variants(value, key)
    for uid in (*getattr(facts, "series_uids", ()), *getattr(facts, "frames", ())):
        found |= _variants(str(uid), "SeriesInstanceUID")
    return found
