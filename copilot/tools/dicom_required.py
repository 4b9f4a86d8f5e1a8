"""What a derived object (DICOM SEG, evidence SR) takes from its source images: the Patient and General Study
attributes it copies are Type 2 (present, possibly empty) and are written empty when a source lacks them; an
attribute DICOM requires (Type 1: the study, series and instance UIDs, the SOP class, a frame of reference where
the object has coordinates) is refused by name and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pydicom

from copilot.errors import HandlerError

TYPE2 = (
    "PatientName", "PatientID", "PatientBirthDate", "PatientSex", "StudyDate", "StudyTime",
    "ReferringPhysicianName", "StudyID", "AccessionNumber",
)  # fmt: skip
TYPE1 = ("StudyInstanceUID", "SeriesInstanceUID", "SOPInstanceUID", "SOPClassUID")


def complete_sources(datasets: Sequence[pydicom.Dataset], what: str, required: Iterable[str] = ()) -> None:
    """Give every source the Type 2 attributes it lacks, empty (in memory; the files stay as they are), after
    refusing (`missing_required_attribute`) a source without a Type 1 attribute the derived object needs."""
    needed = (*TYPE1, *required)
    for ds in datasets:
        missing = [k for k in needed if not str(ds.get(k, "") or "").strip()]
        if missing:
            raise HandlerError(
                "missing_required_attribute",
                f"{what}: a source image lacks {', '.join(missing)}, which DICOM requires of the object to be "
                "written; nothing was written",
            )
        for key in TYPE2:
            if key not in ds:
                setattr(ds, key, "")
