"""Tracked lesions: a finding keeps its Tracking Identifier and Tracking UID (DICOM PS3.16, TID 1501/1410) across
the questions, sessions and exports of one patient, so that measurements of the same lesion at two time points
share the UID that viewers (OHIF's longitudinal mode) and response criteria correlate them by.

A session's book is `lesions.json` in its derived folder (owner-only). A labelled finding ("target 1", "left
adrenal") is the patient's lesion of that name: a name not in the book is looked up in the measurement reports
found beside the study (its folder and the folders of the patient's other studies next to it) and in the derived
folders of the other sessions beside this one, matched by patient (Patient ID and its issuer) and by name (case
and spacing ignored). An unlabelled finding (`point 2`) is the session's own and never matched elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydicom

from copilot.privatefs import private_dir, write_private

BOOK = "lesions.json"
TRACKING_ID = "112039"  # DCM Tracking Identifier (TEXT)
TRACKING_UID = "112040"  # DCM Tracking Unique Identifier (UIDREF)
MAX_FILES = 4000  # files looked at per search
MAX_DEPTH = 4  # folders down from each searched folder
MAX_SR_BYTES = 8 << 20  # a measurement report is small; larger files are images and are skipped unread


def patient_key(ds: pydicom.Dataset) -> str:
    """Who a dataset is about, as reports are matched by: a digest of Patient ID and its issuer (the book never holds
    the ID itself; '' when there is none)."""
    pid = str(ds.get("PatientID") or "").strip()
    if not pid:
        return ""
    issuer = str(ds.get("IssuerOfPatientID") or "").strip()
    return hashlib.sha256(f"{pid}|{issuer}".encode()).hexdigest()[:32]


def name_key(identifier: str) -> str:
    """A lesion's name as compared: case and runs of spaces ignored."""
    return re.sub(r"\s+", " ", identifier).strip().casefold()


def _code(item: pydicom.Dataset) -> str:
    seq = item.get("ConceptNameCodeSequence")
    return str(seq[0].CodeValue) if seq else ""


def _groups(items: Iterable[pydicom.Dataset]) -> Iterator[pydicom.Dataset]:
    """Every content item at any depth (a report's measurement groups hold their tracking items)."""
    pending = list(items)
    while pending:
        item = pending.pop()
        yield item
        pending.extend(item.get("ContentSequence") or [])


def report_lesions(ds: pydicom.Dataset) -> dict[str, tuple[str, str]]:
    """The tracked findings of one measurement report: name key → (Tracking Identifier, Tracking UID)."""
    found: dict[str, tuple[str, str]] = {}
    for group in _groups(ds.get("ContentSequence") or []):
        children = group.get("ContentSequence") or []
        names = [str(c.TextValue) for c in children if _code(c) == TRACKING_ID and "TextValue" in c]
        uids = [str(c.UID) for c in children if _code(c) == TRACKING_UID and "UID" in c]
        if names and uids:
            found.setdefault(name_key(names[0]), (names[0], uids[0]))
    return found


def _reports(folders: Iterable[Path]) -> Iterator[Path]:
    """Candidate report files under the folders, at most `MAX_DEPTH` folders down and `MAX_FILES` in all (files too
    large to be a report skipped unread), so a huge or deep folder cannot stall an export."""
    seen = 0
    for top in folders:
        if not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            depth = len(Path(dirpath).relative_to(top).parts)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")) if depth < MAX_DEPTH else []
            for name in sorted(filenames):
                path = Path(dirpath) / name
                seen += 1
                if seen > MAX_FILES:
                    return
                if not path.is_symlink() and path.stat().st_size <= MAX_SR_BYTES:
                    yield path


def prior_reports(folders: Iterable[Path], patient: str) -> Iterator[pydicom.Dataset]:
    """The patient's measurement reports under `folders` (headers and content; damaged or foreign files skipped)."""
    if not patient:
        return
    for path in _reports(folders):
        try:
            ds = pydicom.dcmread(path, stop_before_pixels=True)
        except Exception:  # not DICOM, or damaged: not a report to learn from
            continue
        if str(ds.get("Modality") or "") == "SR" and patient_key(ds) == patient:
            yield ds


def prior_lesions(folders: Iterable[Path], patient: str) -> dict[str, tuple[str, str]]:
    """The lesions the patient's earlier reports under `folders` name (the first report read wins a name)."""
    found: dict[str, tuple[str, str]] = {}
    for ds in prior_reports(folders, patient):
        for key, value in report_lesions(ds).items():
            found.setdefault(key, value)
    return found


def search_folders(case_root: Path | None, output_dir: Path | None) -> list[Path]:
    """Where a session looks for the patient's earlier reports: the study's folder and the folders beside it (the
    patient's other studies), and the derived folders of the sessions beside this one."""
    folders: list[Path] = []
    if case_root is not None:
        root = Path(case_root)
        folders += [root.parent] if root.parent != root else [root]
    if output_dir is not None:
        sessions = Path(output_dir).parent.parent
        folders += [d for d in sorted(sessions.glob("*/derived")) if d != Path(output_dir)]
    return folders


@dataclass
class LesionBook:
    """The session's tracked lesions: name key → {identifier, uid, first}; `more` gives earlier reports from
    elsewhere (the study's PACS), `problems` says why some could not be read."""

    path: Path | None
    patient: str = ""
    lesions: dict[str, dict[str, str]] = field(default_factory=dict)
    folders: list[Path] = field(default_factory=list)
    more: Callable[[], Iterable[pydicom.Dataset]] | None = None
    problems: list[str] = field(default_factory=list)
    _reports: list[pydicom.Dataset] | None = None
    _prior: dict[str, tuple[str, str]] | None = None

    @classmethod
    def load(cls, output_dir: Path | None, patient: str, folders: list[Path]) -> LesionBook:
        """The book a session's derived folder holds (empty when there is none, or it is of another patient)."""
        path = Path(output_dir) / BOOK if output_dir is not None else None
        book = cls(path, patient, folders=folders)
        if path is not None and path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("patient") == patient:
                book.lesions = {str(k): dict(v) for k, v in (data.get("lesions") or {}).items()}
        return book

    def reports(self) -> list[pydicom.Dataset]:
        """The patient's earlier reports: under the folders, then from `more` (read once; a source that fails is
        named in `problems` and the others still count)."""
        if self._reports is None:
            self._reports = list(prior_reports(self.folders, self.patient))
            if self.more is not None and self.patient:
                try:
                    self._reports += [ds for ds in self.more() if patient_key(ds) == self.patient]
                except Exception as exc:  # the PACS unreachable or refusing: the folders' reports still count
                    why = getattr(exc, "code", type(exc).__name__)
                    self.problems.append(f"earlier reports on the PACS not read: {why}")
        return self._reports

    def prior(self) -> dict[str, tuple[str, str]]:
        """The patient's lesions named by earlier reports (the first report read wins a name)."""
        if self._prior is None:
            self._prior = {}
            for ds in self.reports():
                for key, value in report_lesions(ds).items():
                    self._prior.setdefault(key, value)
        return self._prior

    def track(self, identifier: str, shared: bool) -> tuple[str, str, str]:
        """(Tracking Identifier, Tracking UID, where it came from: `session`, `prior report` or `new`) of a finding;
        `shared` names a patient's lesion (a label), else the finding is this session's own."""
        key = name_key(identifier) if shared else f"\x00{identifier}"
        if key in self.lesions:
            entry = self.lesions[key]
            return entry["identifier"], entry["uid"], "session"
        origin = "new"
        if shared and key in self.prior():
            identifier, uid = self.prior()[key]
            origin = "prior report"
        else:
            uid = str(pydicom.uid.generate_uid())
        self.lesions[key] = {"identifier": identifier, "uid": uid, "first": origin}
        return identifier, uid, origin

    def save(self) -> None:
        """Write the book beside the session's exports (owner-only)."""
        if self.path is None:
            return
        private_dir(self.path.parent)
        write_private(self.path, json.dumps({"patient": self.patient, "lesions": self.lesions}, indent=1) + "\n")

    def listing(self) -> list[dict[str, Any]]:
        """The patient's tracked lesions (labelled ones), for a lesion list."""
        return [{"identifier": v["identifier"], "uid": v["uid"], "first": v["first"]}
                for k, v in self.lesions.items() if not k.startswith("\x00")]  # fmt: skip
