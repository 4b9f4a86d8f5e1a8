"""De-identification of the DICOM objects a session exported (SEG, SR …), as DICOM PS3.15 Annex E's Basic
Application Confidentiality Profile with the Clean Descriptors Option: identifying attributes emptied (Type 2)
or removed, UIDs replaced (consistently across the objects of one export, so references between them hold),
private attributes removed, descriptions and any remaining text cleaned of the study's identifiers, and what was
done declared in the object: PatientIdentityRemoved YES, DeidentificationMethod and its Code Sequence
(DCM 113100 Basic Application Confidentiality Profile, DCM 113105 Clean Descriptors Option).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from typing import Any

# Emptied (Z: Type 2 in the objects we write, kept present), then removed (X), per PS3.15 Table E.1-1.
EMPTIED = ("PatientName", "PatientID", "PatientBirthDate", "PatientSex", "AccessionNumber", "ReferringPhysicianName",
           "StudyID", "StudyDate", "StudyTime", "ContentDate", "ContentTime", "ContentCreatorName")  # fmt: skip
REMOVED = (
    "PatientBirthTime", "PatientAge", "PatientSize", "PatientWeight", "PatientAddress", "PatientTelephoneNumbers",
    "OtherPatientIDs", "OtherPatientNames", "OtherPatientIDsSequence", "PatientMotherBirthName", "MilitaryRank",
    "EthnicGroup", "Occupation", "PatientComments", "AdditionalPatientHistory", "IssuerOfPatientID",
    "InstitutionName", "InstitutionAddress", "InstitutionalDepartmentName", "PerformingPhysicianName",
    "NameOfPhysiciansReadingStudy", "PhysiciansOfRecord", "RequestingPhysician", "OperatorsName", "StationName",
    "DeviceSerialNumber", "SeriesDate", "SeriesTime", "AcquisitionDate", "AcquisitionTime", "AcquisitionDateTime",
    "InstanceCreationDate", "InstanceCreationTime", "StudyDescription", "SeriesDescription", "ImageComments",
    "ProtocolName", "RequestAttributesSequence", "ReferencedPatientSequence", "RequestedProcedureID",
    "ScheduledProcedureStepID", "PerformedProcedureStepID", "PerformedProcedureStepStartDate",
    "PerformedProcedureStepStartTime", "PerformedProcedureStepDescription", "VerifyingObserverSequence",
    "ParticipantSequence", "AuthorObserverSequence", "PersonName",
)  # fmt: skip
TEXT_VRS = {"LO", "SH", "PN", "LT", "ST", "UT", "UC"}
DATE_VRS = {"DA", "DT", "TM"}  # any other date or time: emptied (the profile's Z/D, no dates shifted)
METHOD = "PS3.15 Basic Profile; Clean Descriptors Option"  # LO: 64 characters at most
CODES = (("113100", "Basic Application Confidentiality Profile"), ("113105", "Clean Descriptors Option"))
WELL_KNOWN = "1.2.840.10008."  # the standard's own UIDs (SOP classes, transfer syntaxes, coding schemes): kept


class UidMap:
    """New UIDs for old ones, the same new UID for the same old one within one export (`2.25.` + a salted hash)."""

    def __init__(self) -> None:
        self._salt = secrets.token_bytes(16)
        self.seen: dict[str, str] = {}

    def __call__(self, uid: str) -> str:
        uid = str(uid)
        if not uid or uid.startswith(WELL_KNOWN):
            return uid
        if uid not in self.seen:
            self.seen[uid] = "2.25." + str(int(hashlib.sha256(self._salt + uid.encode()).hexdigest()[:30], 16))
        return self.seen[uid]


def _walk(ds: Any, uids: UidMap, clean: Callable[[str], str]) -> None:
    """One dataset (and its sequences): the profile's actions, UIDs replaced, the rest of its text cleaned."""
    for keyword in EMPTIED:
        if keyword in ds:
            ds[keyword].value = ""
    for keyword in REMOVED:
        if keyword in ds:
            del ds[keyword]
    for element in list(ds):
        if element.VR == "SQ":
            for item in element.value:
                _walk(item, uids, clean)
        elif element.VR == "UI" and element.value:
            values = element.value if element.VM > 1 else [element.value]
            new = [uids(v) for v in values]
            element.value = new if element.VM > 1 else new[0]
        elif element.VR in DATE_VRS and element.value not in (None, ""):
            element.value = ""
        elif element.VR in TEXT_VRS and element.value not in (None, "") and element.keyword not in EMPTIED:
            if element.VM > 1:
                element.value = [clean(str(v)) for v in element.value]
            else:
                element.value = clean(str(element.value))


def deidentify(ds: Any, uids: UidMap, clean: Callable[[str], str]) -> Any:
    """The dataset de-identified in place (see the module docstring); returned for convenience."""
    from pydicom.dataset import Dataset
    from pydicom.sequence import Sequence

    ds.remove_private_tags()
    _walk(ds, uids, clean)
    meta = getattr(ds, "file_meta", None)
    if meta is not None and "MediaStorageSOPInstanceUID" in meta:
        meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
    ds.PatientIdentityRemoved = "YES"
    ds.DeidentificationMethod = METHOD
    items = []
    for value, meaning in CODES:
        item = Dataset()
        item.CodeValue, item.CodingSchemeDesignator, item.CodeMeaning = value, "DCM", meaning
        items.append(item)
    ds.DeidentificationMethodCodeSequence = Sequence(items)
    ds.LongitudinalTemporalInformationModified = "REMOVED"
    return ds
