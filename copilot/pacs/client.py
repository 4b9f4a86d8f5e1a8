"""One DICOMweb service: QIDO-RS search, WADO-RS retrieval, STOW-RS storage, with PACS failures named."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import pydicom

from copilot.pacs.auth import http_session
from copilot.pacs.errors import PacsError
from copilot.pacs.urls import service_root

T = TypeVar("T")
TIMEOUT_S = 30.0
RETRIES = 3  # busy (429/503/504) or unreachable: tried three times in about 1.5 s
STUDY_FIELDS = ("StudyDate", "StudyDescription", "PatientID", "ModalitiesInStudy", "NumberOfStudyRelatedSeries")
SERIES_FIELDS = ("Modality", "SeriesDescription", "SeriesNumber", "NumberOfSeriesRelatedInstances")


def _value(item: dict[str, Any], keyword: str) -> Any:
    """The first value of a DICOM JSON attribute (None when absent); person names as their alphabetic form."""
    tag = f"{pydicom.datadict.tag_for_keyword(keyword):08X}"
    values = item.get(tag, {}).get("Value") or [None]
    first = values[0]
    return first.get("Alphabetic") if isinstance(first, dict) else first


class PacsClient:
    """A DICOMweb service root with its credentials; every method raises `PacsError` for PACS trouble."""

    def __init__(self, url: str) -> None:
        from dicomweb_client import DICOMwebClient

        self.root = service_root(url)
        self._client = DICOMwebClient(self.root, session=http_session(self.root), timeout=TIMEOUT_S)
        self._client.set_http_retry_params(max_attempts=RETRIES, wait_exponential_multiplier=250)  # ~1.5 s, not 30

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        import requests

        try:
            return fn()
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            code = "pacs_refused" if status is not None and 400 <= status < 500 else "pacs_failed"
            reason = exc.response.reason if exc.response is not None else ""
            raise PacsError(code, f"the PACS answered {what} with HTTP {status} {reason}".strip(), status) from None
        except requests.exceptions.SSLError:
            raise PacsError(
                "pacs_tls",
                f"the TLS certificate of {self.root} could not be verified (a private CA: MEDCOPILOT_PACS_CA_BUNDLE)",
            ) from None
        except requests.RequestException as exc:
            kind = type(exc).__name__
            raise PacsError("pacs_unreachable", f"the PACS at {self.root} could not be reached ({kind})") from None

    # ----- QIDO-RS -----
    def search(
        self, patient_id: str | None = None, modality: str | None = None, date: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Studies matching the filters, each with its series (`uid`, `modality`, `description`, …)."""
        filters: dict[str, Any] = {}
        if patient_id:
            filters["PatientID"] = patient_id
        if modality:
            filters["ModalitiesInStudy"] = modality
        if date:
            filters["StudyDate"] = date
        found = self._call(
            "a study search",
            lambda: self._client.search_for_studies(search_filters=filters, fields=list(STUDY_FIELDS), limit=limit),
        )
        studies = []
        for item in found:
            uid = str(_value(item, "StudyInstanceUID"))
            studies.append(
                {
                    "uid": uid,
                    "date": _value(item, "StudyDate"),
                    "description": _value(item, "StudyDescription"),
                    "patient_id": _value(item, "PatientID"),
                    "url": f"{self.root}/studies/{uid}",
                    "series": self.series(uid, modality),
                }
            )
        return studies

    def series(self, study: str, modality: str | None = None) -> list[dict[str, Any]]:
        """The series of a study (only `modality`'s when given), in series-number order."""
        filters = {"Modality": modality} if modality else None
        found = self._call(
            "a series search",
            lambda: self._client.search_for_series(study, search_filters=filters, fields=list(SERIES_FIELDS)),
        )
        out = [
            {
                "uid": str(_value(item, "SeriesInstanceUID")),
                "modality": _value(item, "Modality"),
                "description": _value(item, "SeriesDescription"),
                "number": _value(item, "SeriesNumber"),
                "instances": _value(item, "NumberOfSeriesRelatedInstances"),
                "url": f"{self.root}/studies/{study}/series/{_value(item, 'SeriesInstanceUID')}",
            }
            for item in found
        ]
        return sorted(out, key=lambda s: (s["number"] is None, s["number"] or 0))

    # ----- WADO-RS -----
    def iter_series(self, study: str, series: str) -> Iterator[pydicom.Dataset]:
        """The instances of a series, one at a time (as stored, any transfer syntax)."""
        it = self._call(
            "a series retrieval",
            lambda: self._client.iter_series(study, series, media_types=(("application/dicom", "*"),)),
        )
        while True:
            ds = self._call("a series retrieval", lambda: next(it, None))
            if ds is None:
                return
            yield ds

    def retrieve_instance(self, study: str, series: str, instance: str) -> pydicom.Dataset:
        """One stored instance (e.g. to check what a store left on the PACS)."""
        return self._call(
            "an instance retrieval",
            lambda: self._client.retrieve_instance(study, series, instance, media_types=(("application/dicom", "*"),)),
        )

    # ----- STOW-RS -----
    def store(self, datasets: Sequence[pydicom.Dataset], study: str) -> list[dict[str, str]]:
        """Store instances into a study; the stored instances with their retrieve URLs. A store the PACS
        accepts only in part is a refusal too (`pacs_refused`)."""
        response = self._call("a store", lambda: self._client.store_instances(list(datasets), study))
        failed = getattr(response, "FailedSOPSequence", None)
        if failed:
            reasons = sorted({str(getattr(item, "FailureReason", "?")) for item in failed})
            why = ", ".join(reasons)
            raise PacsError("pacs_refused", f"the PACS refused {len(failed)} instance(s) (failure reason {why})")
        stored = []
        for ds, item in zip(datasets, getattr(response, "ReferencedSOPSequence", []) or [], strict=False):
            stored.append(
                {
                    "sop_instance_uid": str(item.ReferencedSOPInstanceUID),
                    "series_instance_uid": str(ds.SeriesInstanceUID),
                    "url": f"{self.root}/studies/{study}/series/{ds.SeriesInstanceUID}/instances/"
                    f"{item.ReferencedSOPInstanceUID}",
                }
            )
        return stored
