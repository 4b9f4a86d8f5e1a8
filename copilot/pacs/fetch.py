"""A study path or a DICOMweb URL → the local study to open (WADO-RS into the cache), with its origin.

A series URL opens that series; a study URL retrieves the study's image series (structured reports,
segmentations, presentation states and other non-image objects stay on the PACS) and opens like a DICOM folder.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from copilot.errors import HandlerError
from copilot.pacs.cache import ORIGIN_FILE, CacheBudget, PacsCache, read_origin, write_origin
from copilot.pacs.client import PacsClient
from copilot.pacs.errors import PacsError
from copilot.pacs.limits import Deadline
from copilot.pacs.patient import study_identity
from copilot.pacs.pool import SeriesProgress, retrieve_pooled
from copilot.pacs.urls import DicomwebRef, is_dicomweb_url, parse_dicomweb_url
from copilot.pacs.writer import SeriesWriter
from copilot.privatefs import private_dir

NOT_IMAGES = frozenset({"SR", "KO", "PR", "SEG", "RTSTRUCT", "RTPLAN", "RTDOSE", "REG", "DOC", "OT_PDF", "AU"})
DERIVED_RESULTS = frozenset({"SEG", "SR", "KO", "PR", "RTSTRUCT", "RTPLAN", "REG", "DOC"})  # never opened as images
NO_LISTING = frozenset({"pacs_refused", "pacs_failed", "pacs_bad_answer"})  # then the series in one answer
S = TypeVar("S")
Listing = list[tuple[str, int | None]]


@dataclass(frozen=True)
class LocalStudy:
    """Where a study lies on this machine, and where it came from (None: a local path)."""

    path: Path
    origin: dict[str, Any] | None = None


def origin_of(ref: DicomwebRef) -> dict[str, Any]:
    """What the trace header records of a PACS study: service root, UIDs and URL (no credentials)."""
    out: dict[str, Any] = {"dicomweb": ref.base, "study": ref.study, "url": ref.url}
    if ref.series:
        out["series"] = ref.series
    return out


def _resume_hint(ref: DicomwebRef) -> str:
    return f"`medcopilot pacs get {ref.url}` resumes it"


def incomplete_error(origin: dict[str, Any], ref: DicomwebRef | None = None) -> PacsError:
    """The refusal to open a series the cache holds only in part, with the missing count."""
    held, expected = int(origin.get("instances") or 0), origin.get("expected")
    missing = f"{expected - held} of {expected} instances missing" if isinstance(expected, int) else (
        "the retrieval did not finish")  # fmt: skip
    hint = _resume_hint(ref) if ref is not None else "`medcopilot pacs get URL` resumes it"
    return PacsError("pacs_incomplete", f"the series is incomplete ({held} held, {missing}); {hint}")


def _listing(client: PacsClient, ref: DicomwebRef, expected: int | None, deadline: Deadline) -> Listing | None:
    """The series' instances in instance order, to be retrieved one by one; None (the whole series in one answer)
    when one request at a time is allowed (MEDCOPILOT_PACS_WORKERS=1), the count is unknown, the PACS does not
    list instances, or lists fewer than the series says it holds."""
    if expected is None or client.limits.workers <= 1:
        return None
    assert ref.series is not None
    try:
        listed = client.instances(ref.study, ref.series, client.deadline().sooner(deadline))
    except PacsError as exc:
        if exc.code in NO_LISTING:
            return None
        raise
    return listed if len(listed) >= expected else None


def retrieve_series(
    client: PacsClient, ref: DicomwebRef, cache: PacsCache, expected: int | None = None, keep: Sequence[Path] = (),
    deadline: Deadline | None = None, progress: SeriesProgress | None = None,
) -> Path:  # fmt: skip
    """One series in the cache; its folder. A complete copy holding `expected` instances is reused; anything
    less is retrieved again, keeping the instances already held (a resume): as one streamed answer, or with
    MEDCOPILOT_PACS_WORKERS above 1 instance by instance through a pool of that many requests (`pool`) when the
    PACS lists them. Instances are written as they arrive
    within the cache bound (`progress` hears of each); the series is marked complete only when every answer
    ended properly and it holds at least `expected` instances, else it stays marked incomplete (never opened)
    and `pacs_incomplete` (or the refusal that stopped it) is raised. Making room never removes `keep` (the
    other series of a study being opened)."""
    assert ref.series is not None
    series = ref.series
    folder = cache.series_dir(ref.base, ref.study, series)
    origin = read_origin(folder)
    if origin is not None and origin.get("complete") and (expected is None or origin.get("instances") == expected):
        cache.touch(folder)
        if progress is not None:
            _replay(folder, series, progress)
        return folder
    private_dir(cache.root)  # the cache holds patient data: owner-only whatever the umask (an older root narrowed)
    private_dir(folder)
    writer = SeriesWriter(folder, ref.series)

    def record(complete: bool) -> dict[str, Any]:
        state = {**origin_of(ref), "instances": writer.count, "expected": expected, "complete": complete}
        write_origin(folder, state)
        return state

    record(False)
    budget = CacheBudget(cache, [*keep, folder])  # counts the record just written
    writer.take, writer.give = budget.take, budget.give
    deadline = deadline or client.deadline(retrieval=True)
    arrived = (lambda pos, path, ds: progress.arrived(series, pos, path, ds)) if progress is not None else None
    try:
        listing = _listing(client, ref, expected, deadline)
        if progress is not None and (listing is not None or expected is not None):
            progress.listed(series, len(listing) if listing is not None else expected or 0)
        if listing is None:
            writer.on_instance = arrived
            client.retrieve_series(ref.study, series, writer, deadline)
        else:
            retrieve_pooled(client, ref.study, series, folder, listing, writer.held, budget, deadline, arrived)
    except PacsError as exc:
        writer.discard()
        record(False)
        kept = f"{writer.count} instance(s) kept" + (f" of {expected}" if expected is not None else "")
        raise PacsError(exc.code, f"{exc.message} — {kept}; {_resume_hint(ref)}", exc.http_status) from None
    except BaseException:
        writer.discard()
        record(False)
        raise
    if writer.count == 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise HandlerError("not_found", "the PACS holds no instances of that series")
    state = record(expected is None or writer.count >= expected)
    if not state["complete"]:
        raise incomplete_error(state, ref)
    return folder  # the bound held while it arrived; what an older, larger cache holds is evicted by `fetch`


def _replay(folder: Path, series: str, progress: SeriesProgress) -> None:
    """A series the cache already holds, told to `progress` as if it had just arrived."""
    files = sorted(folder.glob("*.dcm"))
    progress.listed(series, len(files))
    for pos, path in enumerate(files):
        progress.arrived(series, pos, path)


def fetch(url: str, cache: PacsCache | None = None, progress: SeriesProgress | None = None) -> LocalStudy:
    """Retrieve the study or series a DICOMweb URL names into the cache (`progress` hears of each instance)."""
    ref = parse_dicomweb_url(url)
    cache = cache or PacsCache()
    cache.sweep()
    client = PacsClient(ref.base)
    deadline = client.deadline(retrieval=True)
    listed = client.series(ref.study, deadline=client.deadline().sooner(deadline))
    if ref.series is not None:
        match = [s for s in listed if s["uid"] == ref.series]
        if not match:
            raise HandlerError("not_found", "the PACS holds no such series in that study")
        if str(match[0]["modality"] or "").upper() in DERIVED_RESULTS:  # an RT Dose series opens as a volume
            raise HandlerError("not_an_image", f"that series is a derived result ({match[0]['modality']}), not an "
                               "image series: open the study or its source series")  # fmt: skip
        folder = retrieve_series(client, ref, cache, match[0]["instances"], deadline=deadline, progress=progress)
        cache.evict(keep=[folder])
        return LocalStudy(folder, origin_of(ref))
    images = [s for s in listed if str(s["modality"] or "").upper() not in NOT_IMAGES]
    if not images:
        raise HandlerError("not_found", "the PACS holds no image series in that study")
    study_dir = cache.study_dir(ref.base, ref.study)
    folders: list[Path] = []
    for s in images:
        folders.append(
            retrieve_series(client, dataclasses.replace(ref, series=s["uid"]), cache, s["instances"], folders, deadline,
                            progress)
        )
    cache.evict(keep=folders)  # once per study: the cache is walked once, not after every series
    derived = [{k: s[k] for k in ("uid", "modality", "description", "number", "instances")} for s in listed
               if str(s["modality"] or "").upper() in NOT_IMAGES]  # listed apart as the study's derived results
    write_origin(study_dir, {**origin_of(ref), "derived": derived})
    return LocalStudy(study_dir, origin_of(ref))


def local_study(location: str | Path, cache: PacsCache | None = None) -> LocalStudy:
    """A local path as it is (with the origin recorded if it is a cached PACS folder), or a DICOMweb URL fetched."""
    if is_dicomweb_url(location):
        return fetch(str(location), cache)
    path = Path(location)
    origin = read_origin(path) if path.is_dir() else None
    if origin is None:
        return LocalStudy(path)
    for part in [path, *(p.parent for p in path.glob(f"*/{ORIGIN_FILE}"))]:
        recorded = read_origin(part) or {}
        if "series" in recorded and not recorded.get("complete", True):
            raise incomplete_error(recorded, parse_dicomweb_url(str(recorded.get("url", ""))) if recorded.get("url")
                                   else None)  # fmt: skip
    return LocalStudy(path, {k: v for k, v in origin.items() if k in ("dicomweb", "study", "series", "url")})


def with_origin(study: S, origin: dict[str, Any] | None) -> S:
    """A study (or case pack) whose inputs carry its PACS origin: recorded in the trace header's `case_inputs`,
    read by the export handlers to store results back, with the UIDs of the study the patient banner shows
    (`shown`: a store must match them); never part of what the model is shown."""
    if origin is None:
        return study
    shown = study_identity(getattr(study, "root", "."), getattr(study, "inputs", {}))  # what the banner shows
    inputs = {**getattr(study, "inputs", {}), "origin": {**origin, "shown": shown}}
    return dataclasses.replace(study, inputs=inputs)  # type: ignore[type-var]
