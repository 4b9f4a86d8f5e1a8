"""One DICOMweb service: QIDO-RS search and WADO-RS retrieval as bounded streams (`transport`), STOW-RS storage
through `dicomweb-client`; every PACS failure a named `pacs_*` refusal, every server string made printable."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from copilot.pacs.auth import http_session
from copilot.pacs.errors import PacsError, http_refusal
from copilot.pacs.jsonstream import JsonArrayItems
from copilot.pacs.limits import Deadline, PacsLimits
from copilot.pacs.multipart import MultipartReader, PartSink, boundary_of
from copilot.pacs.printable import printable_or_none
from copilot.pacs.query import name_forms, query_string, study_filters
from copilot.pacs.transport import bound_posts, open_stream
from copilot.pacs.urls import UID_RE, service_root

if TYPE_CHECKING:
    import pydicom

T = TypeVar("T")
RETRIES = 3  # a store: busy (429/503/504) or unreachable, tried three times in about 1.5 s
STUDY_FIELDS = ("StudyDate", "StudyDescription", "PatientID", "ModalitiesInStudy",
                "NumberOfStudyRelatedSeries")  # fmt: skip
SERIES_FIELDS = ("Modality", "SeriesDescription", "SeriesNumber", "NumberOfSeriesRelatedInstances")
JSON = "application/dicom+json"
MULTIPART_DICOM = 'multipart/related; type="application/dicom"; transfer-syntax=*'


TAGS = {  # the attributes read from QIDO answers (pydicom, and its import, only for any other)
    "AccessionNumber": "00080050", "InstanceNumber": "00200013", "Modality": "00080060",
    "NumberOfSeriesRelatedInstances": "00201209", "PatientID": "00100020", "PatientName": "00100010",
    "SOPInstanceUID": "00080018", "SeriesDescription": "0008103E", "SeriesInstanceUID": "0020000E",
    "SeriesNumber": "00200011", "StudyDate": "00080020", "StudyDescription": "00081030",
    "StudyInstanceUID": "0020000D", "ModalitiesInStudy": "00080061", "NumberOfStudyRelatedSeries": "00201206",
}  # fmt: skip


def _tag(keyword: str) -> str:
    if keyword in TAGS:
        return TAGS[keyword]
    import pydicom

    return f"{pydicom.datadict.tag_for_keyword(keyword):08X}"


def _value(item: dict[str, Any], keyword: str) -> Any:
    """The first value of a DICOM JSON attribute (None when absent or malformed); person names as their
    alphabetic form; text made printable."""
    tag = _tag(keyword)
    element = item.get(tag)
    values = element.get("Value") if isinstance(element, dict) else None
    first = values[0] if isinstance(values, list) and values else None
    if isinstance(first, dict):
        first = first.get("Alphabetic")
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return first
    return printable_or_none(first) if isinstance(first, str) else None


def _count(item: dict[str, Any], keyword: str) -> int | None:
    """A count attribute (IS/US) as a non-negative int, or None."""
    value = _value(item, keyword)
    try:
        number = int(float(value)) if value is not None else None
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number is not None and 0 <= number < 1 << 31 else None


def _uid(item: dict[str, Any], keyword: str) -> str | None:
    value = _value(item, keyword)
    return value if isinstance(value, str) and len(value) <= 64 and UID_RE.match(value) else None


@dataclass
class SearchPage:
    """One page of a study search: the studies shown, whether more match (`more`), and the total when the
    server says it (`total`)."""

    studies: list[dict[str, Any]]
    offset: int
    more: bool
    total: int | None = None
    left_out: int = 0  # entries without a valid study UID
    notes: list[str] = field(default_factory=list)


class PacsClient:
    """A DICOMweb service root with its credentials and limits; every method raises `PacsError` for PACS trouble."""

    def __init__(self, url: str, limits: PacsLimits | None = None) -> None:
        self.root = service_root(url)
        self.limits = limits or PacsLimits.from_env()
        self._session = http_session(self.root, self.limits.redirects, self.limits.workers)
        self._stow: Any = None

    def deadline(self, retrieval: bool = False) -> Deadline:
        """A fresh overall deadline for one command (or one retrieval)."""
        if retrieval:
            return Deadline(self.limits.retrieval_s, "the retrieval", "MEDCOPILOT_PACS_RETRIEVAL_S")
        return Deadline(self.limits.command_s, "the PACS request", "MEDCOPILOT_PACS_DEADLINE_S")

    def _json(self, path: str, params: dict[str, Any], max_items: int, what: str, deadline: Deadline) -> tuple[
        list[dict[str, Any]], bool, Any
    ]:  # fmt: skip
        """At most `max_items` entries of a QIDO answer (read no further), whether it held more, its headers."""
        stream = open_stream(
            self._session, f"{self.root}{path}?{query_string(params)}", accept=JSON, deadline=deadline,
            limits=self.limits, what=what, limit=self.limits.json_bytes, limit_code="pacs_answer_too_large",
        )  # fmt: skip
        items: list[dict[str, Any]] = []
        parser = JsonArrayItems(self.limits.json_depth, self.limits.json_item_bytes)
        try:
            if stream.response.status_code == 204:
                return [], False, stream.headers
            for chunk in stream.chunks():
                items.extend(parser.feed(chunk))
                if len(items) > max_items:
                    return items[:max_items], True, stream.headers
            parser.finish()
        finally:
            stream.close()
        return items, False, stream.headers

    # ----- QIDO-RS -----
    def search_page(
        self, patient_id: str | None = None, modality: str | None = None, date: str | None = None, limit: int = 50,
        offset: int = 0, *, patient_name: str | None = None, accession: str | None = None,
        description: str | None = None,
    ) -> SearchPage:  # fmt: skip
        """One page of matching studies (`limit` from `offset`), each with its series; the server is asked for
        one study more than shown (to know whether more exist) and series only of the studies shown."""
        if not 1 <= limit <= 1000 or offset < 0:
            raise PacsError("invalid_query", "--limit must be 1 to 1000 and --offset at least 0")
        filters = study_filters(patient_id, modality, date, patient_name, accession, description)
        deadline = self.deadline()
        for form in name_forms(patient_name)[1:] if patient_name else []:  # "Given Family": the other order too
            page = self._page({**filters}, modality, limit, offset, deadline)
            if page.studies or page.more or page.left_out:
                return page
            filters["PatientName"] = form
        return self._page(filters, modality, limit, offset, deadline)

    def _page(
        self, filters: dict[str, str], modality: str | None, limit: int, offset: int, deadline: Deadline,
    ) -> SearchPage:  # fmt: skip
        """One page of the studies matching `filters`."""
        params = {**filters, "limit": limit + 1, "offset": offset, "includefield": list(STUDY_FIELDS)}
        found, cut, headers = self._json("/studies", params, limit + 1, "a study search", deadline)
        more = cut or len(found) > limit
        total = headers.get("X-Total-Count", "")
        page = SearchPage([], offset, more, int(total) if total.isdigit() else None)
        for item in found[:limit]:
            uid = _uid(item, "StudyInstanceUID")
            if uid is None:
                page.left_out += 1
                continue
            page.studies.append({
                "uid": uid, "date": _value(item, "StudyDate"), "description": _value(item, "StudyDescription"),
                "patient_id": _value(item, "PatientID"), "patient_name": _value(item, "PatientName"),
                "accession": _value(item, "AccessionNumber"), "url": f"{self.root}/studies/{uid}",
                "series": self.series(uid, modality, deadline),
            })  # fmt: skip
        return page

    def search(
        self, patient_id: str | None = None, modality: str | None = None, date: str | None = None, limit: int = 50,
        **more: Any,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """The studies of the first page of a search (see `search_page`)."""
        return self.search_page(patient_id, modality, date, limit, **more).studies

    def series(self, study: str, modality: str | None = None, deadline: Deadline | None = None) -> list[dict[str, Any]]:
        """The series of a study (only `modality`'s when given), in series-number order."""
        params: dict[str, Any] = {"includefield": list(SERIES_FIELDS)}
        if modality:
            params["Modality"] = modality
        found, cut, _ = self._json(
            f"/studies/{study}/series", params, self.limits.max_series, "a series search", deadline or self.deadline()
        )
        if cut:
            raise PacsError("pacs_too_many", f"the PACS lists more than {self.limits.max_series} series for a study")
        out = []
        for item in found:
            uid = _uid(item, "SeriesInstanceUID")
            if uid is None:
                continue
            out.append({
                "uid": uid, "modality": _value(item, "Modality"), "description": _value(item, "SeriesDescription"),
                "number": _count(item, "SeriesNumber"), "instances": _count(item, "NumberOfSeriesRelatedInstances"),
                "url": f"{self.root}/studies/{study}/series/{uid}",
            })  # fmt: skip
        return sorted(out, key=lambda s: (s["number"] is None, s["number"] or 0))

    def instances(self, study: str, series: str, deadline: Deadline | None = None) -> list[tuple[str, int | None]]:
        """The instances of a series as (SOP Instance UID, Instance Number), in instance-number order (those
        without a number last, as listed); more than `max_instances` is `pacs_too_many`."""
        found, cut, _ = self._json(
            f"/studies/{study}/series/{series}/instances", {"includefield": ["InstanceNumber"]},
            self.limits.max_instances, "an instance listing", deadline or self.deadline(),
        )  # fmt: skip
        if cut:
            raise PacsError("pacs_too_many", f"the PACS lists more than {self.limits.max_instances} instances")
        listed = [(uid, _count(item, "InstanceNumber")) for item in found if (uid := _uid(item, "SOPInstanceUID"))]
        order = sorted(range(len(listed)), key=lambda i: (listed[i][1] is None, listed[i][1] or 0, i))
        return [listed[i] for i in order]

    # ----- WADO-RS -----
    def _multipart(self, path: str, sink: PartSink, deadline: Deadline, what: str) -> int:
        """Stream a multipart answer into `sink`; the number of parts. The answer must end with its closing
        boundary (`pacs_truncated` otherwise)."""
        stream = open_stream(
            self._session, f"{self.root}{path}", accept=MULTIPART_DICOM, deadline=deadline, limits=self.limits,
            what=what, limit=1 << 62, limit_code="pacs_answer_too_large", encoding="identity",
        )  # fmt: skip
        try:
            reader = MultipartReader(
                boundary_of(stream.headers.get("Content-Type", "")), sink, self.limits.part_bytes,
                self.limits.part_header_bytes,
            )  # fmt: skip
            for chunk in stream.chunks():
                reader.feed(chunk)
            reader.finish()
        except BaseException:
            stream.close()
            raise
        stream.release()  # kept open for the next instance's request
        return reader.parts

    def retrieve_series(self, study: str, series: str, sink: PartSink, deadline: Deadline | None = None) -> int:
        """Stream the instances of a series into `sink` (one part per instance); the number of parts."""
        return self._multipart(f"/studies/{study}/series/{series}", sink, deadline or self.deadline(retrieval=True),
                               "the series retrieval")  # fmt: skip

    def retrieve_instance(self, study: str, series: str, instance: str, sink: PartSink, deadline: Deadline) -> None:
        """Stream one instance into `sink`; an answer holding other than one part is `pacs_bad_answer`."""
        parts = self._multipart(f"/studies/{study}/series/{series}/instances/{instance}", sink, deadline,
                                "an instance retrieval")  # fmt: skip
        if parts != 1:
            raise PacsError("pacs_bad_answer", f"the PACS answered an instance retrieval with {parts} parts")

    def iter_series(self, study: str, series: str) -> Iterator[pydicom.Dataset]:
        """The instances of a series, read back from a private temporary folder (small series: checks, tests)."""
        import pydicom

        from copilot.pacs.writer import SeriesWriter

        with tempfile.TemporaryDirectory(prefix="medcopilot-wado-") as tmp:
            writer = SeriesWriter(Path(tmp), series)
            self.retrieve_series(study, series, writer)
            for path in sorted(Path(tmp).glob("*.dcm")):
                yield pydicom.dcmread(path)

    # ----- STOW-RS -----
    def _call(self, what: str, fn: Callable[[], T]) -> T:
        import requests
        import retrying

        try:
            return fn()
        except retrying.RetryError as exc:  # busy on every try (429/503/504): the last answer's refusal
            last = getattr(exc.last_attempt, "value", None)
            status, reason = getattr(last, "status_code", 0), getattr(last, "reason", "")
            raise http_refusal(what, int(status or 0), str(reason or "busy")) from None
        except requests.HTTPError as exc:
            response = exc.response
            raise http_refusal(what, response.status_code if response is not None else 0,
                               response.reason if response is not None else "") from None  # fmt: skip
        except requests.exceptions.SSLError:
            raise PacsError(
                "pacs_tls",
                f"the TLS certificate of {self.root} could not be verified (a private CA: MEDCOPILOT_PACS_CA_BUNDLE)",
            ) from None
        except requests.RequestException as exc:
            kind = type(exc).__name__
            raise PacsError("pacs_unreachable", f"the PACS at {self.root} could not be reached ({kind})") from None

    def store(self, datasets: Sequence[pydicom.Dataset], study: str) -> list[dict[str, str]]:
        """Store instances into a study; the stored instances with their retrieve URLs. A store the PACS
        accepts only in part is a refusal too (`pacs_refused`)."""
        if self._stow is None:
            from dicomweb_client import DICOMwebClient

            self._stow = DICOMwebClient(self.root, session=self._session, timeout=self.limits.read_s)
            self._stow.set_http_retry_params(max_attempts=RETRIES, wait_exponential_multiplier=250)
        hooks = self._session.hooks["response"]
        guard = bound_posts(self.limits, self.deadline(retrieval=True))  # the reply bounded in size and time
        hooks.append(guard)
        try:
            response = self._call("a store", lambda: self._stow.store_instances(list(datasets), study))
        finally:
            hooks.remove(guard)
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
