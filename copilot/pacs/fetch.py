"""A study path or a DICOMweb URL → the local study to open (WADO-RS into the cache), with its origin.

A series URL opens that series; a study URL retrieves the study's image series (structured reports,
segmentations, presentation states and other non-image objects stay on the PACS) and opens like a DICOM folder.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from copilot.errors import HandlerError
from copilot.pacs.cache import PacsCache, read_origin, write_origin
from copilot.pacs.client import PacsClient
from copilot.pacs.patient import study_identity
from copilot.pacs.urls import DicomwebRef, is_dicomweb_url, parse_dicomweb_url
from copilot.privatefs import make_private, private_dir

NOT_IMAGES = frozenset({"SR", "KO", "PR", "SEG", "RTSTRUCT", "RTPLAN", "RTDOSE", "REG", "DOC", "OT_PDF", "AU"})
S = TypeVar("S")


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


def retrieve_series(
    client: PacsClient, ref: DicomwebRef, cache: PacsCache, expected: int | None = None, keep: Sequence[Path] = ()
) -> Path:
    """One series in the cache (retrieved unless a complete copy of the same size is there); its folder. Making
    room never removes `keep` (the other series of a study being opened)."""
    assert ref.series is not None
    folder = cache.series_dir(ref.base, ref.study, ref.series)
    origin = read_origin(folder)
    if origin is not None and origin.get("complete") and (expected is None or origin.get("instances") == expected):
        cache.touch(folder)
        return folder
    private_dir(cache.root)  # the cache holds patient data: owner-only whatever the umask (an older root narrowed)
    private_dir(folder.parent)
    partial = folder.parent / f".{folder.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    private_dir(partial)
    try:
        n = 0
        for ds in client.iter_series(ref.study, ref.series):
            n += 1
            ds.save_as(partial / f"{n:05d}.dcm", enforce_file_format=True)
        if n == 0:
            raise HandlerError("not_found", "the PACS holds no instances of that series")
        write_origin(partial, {**origin_of(ref), "instances": n, "complete": True})
        make_private(partial)  # the files pydicom wrote, 0600
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    cache.evict(keep=[*keep, folder])
    return folder


def fetch(url: str, cache: PacsCache | None = None) -> LocalStudy:
    """Retrieve the study or series a DICOMweb URL names into the cache."""
    ref = parse_dicomweb_url(url)
    cache = cache or PacsCache()
    client = PacsClient(ref.base)
    listed = client.series(ref.study)
    if ref.series is not None:
        match = [s for s in listed if s["uid"] == ref.series]
        if not match:
            raise HandlerError("not_found", "the PACS holds no such series in that study")
        folder = retrieve_series(client, ref, cache, match[0]["instances"])
        return LocalStudy(folder, origin_of(ref))
    images = [s for s in listed if str(s["modality"] or "").upper() not in NOT_IMAGES]
    if not images:
        raise HandlerError("not_found", "the PACS holds no image series in that study")
    study_dir = cache.study_dir(ref.base, ref.study)
    folders: list[Path] = []
    for s in images:
        folders.append(
            retrieve_series(client, dataclasses.replace(ref, series=s["uid"]), cache, s["instances"], folders)
        )
    cache.evict(keep=folders)
    write_origin(study_dir, origin_of(ref))
    return LocalStudy(study_dir, origin_of(ref))


def local_study(location: str | Path, cache: PacsCache | None = None) -> LocalStudy:
    """A local path as it is (with the origin recorded if it is a cached PACS folder), or a DICOMweb URL fetched."""
    if is_dicomweb_url(location):
        return fetch(str(location), cache)
    path = Path(location)
    origin = read_origin(path) if path.is_dir() else None
    if origin is None:
        return LocalStudy(path)
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
