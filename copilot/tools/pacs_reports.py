"""The patient's earlier measurement reports on the PACS a study came from: SR series of the patient's studies
(QIDO-RS by Patient ID), retrieved by WADO-RS — at most `MAX_STUDIES` studies and `MAX_REPORTS` reports, so a
long history cannot stall an export."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pydicom

MAX_STUDIES = 20
MAX_REPORTS = 40


def pacs_reports(origin: dict[str, Any] | None, patient_id: str) -> Iterator[pydicom.Dataset]:
    """The SR instances of the patient's studies on the origin's PACS (none without a PACS or a Patient ID)."""
    if not origin or not origin.get("dicomweb") or not patient_id.strip():
        return
    from copilot.pacs.client import PacsClient

    client = PacsClient(str(origin["dicomweb"]))
    found = 0
    for study in client.search(patient_id=patient_id.strip(), limit=MAX_STUDIES):
        for series in [s for s in study.get("series") or [] if s.get("modality") == "SR"]:
            for ds in client.iter_series(str(study["uid"]), str(series["uid"])):
                yield ds
                found += 1
                if found >= MAX_REPORTS:
                    return


def session_book(ctx: Any, source: pydicom.Dataset) -> Any:
    """A session's lesion book for the patient of `source`: its own `lesions.json`, earlier reports in the folders
    beside the study and the sessions beside this one, and on the study's PACS when it came from one."""
    from copilot.tools.tracking import LesionBook, patient_key, search_folders

    book = LesionBook.load(ctx.output_dir, patient_key(source), search_folders(ctx.case_root, ctx.output_dir))
    origin, patient_id = ctx.case_inputs.get("origin"), str(source.get("PatientID") or "")
    if origin and origin.get("dicomweb"):
        book.more = lambda: pacs_reports(origin, patient_id)
    return book
