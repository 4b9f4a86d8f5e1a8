"""Loading volumes: files and DICOM series (by content), and a case path's volumes through a small cache of
immutable volumes keyed by file identity."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

import SimpleITK as sitk

from copilot.engine.volume.dicom import load_dicom_file, load_dicom_series
from copilot.engine.volume.headers import is_dicom, vet_volume_file
from copilot.engine.volume.image import (
    VOLUME_SUFFIXES,
    Volume,
    VolumeLoadError,
    affine_from_sitk,
    check_nifti_complete,
    guess_modality,
    pick_frame,
    sitk_reason,
    volume_from_sitk,
    volume_name_for,
)
from copilot.engine.volume.nifti_direct import read_nifti_direct
from copilot.errors import HandlerError

_CACHE: OrderedDict[tuple[str, int, int, bool, str | None, int | None], Volume] = OrderedDict()
_CACHE_SIZE = 24
_LOCK = threading.Lock()


def _key(
    path: Path, assumed: bool, series_uid: str | None = None, frame: int | None = None
) -> tuple[str, int, int, bool, str | None, int | None]:
    st = path.stat()
    return (str(path.resolve()), st.st_mtime_ns, st.st_size, assumed, series_uid, frame)


def load_volume(
    path: str | os.PathLike[str],
    name: str | None = None,
    accept_missing_geometry: bool = False,
    series_uid: str | None = None,
    frame: int | None = None,
) -> Volume:
    """Load a NIfTI/NRRD/MetaImage file, a DICOM file, or a DICOM series folder (its first series, or the one
    with `series_uid`).

    A NIfTI file shorter than its header says is refused (`truncated_image`) instead of zero-filled;
    `accept_missing_geometry` loads DICOM without patient geometry on an assumed grid (flagged in metadata).
    A 4D image opens one frame at a time (`frame`, the first by default; metadata `frame` and `frames`).
    """
    p = Path(path)
    vet_volume_file(p)  # the file and every file it names stay in the case; its declared size within budget
    if p.is_dir():
        return load_dicom_series(p, name=name, series_uid=series_uid, accept_missing_geometry=accept_missing_geometry)
    if not p.is_file():
        raise VolumeLoadError(f"no such file: {p.name}", "not_found")
    if p.suffix.lower() == ".dcm" or is_dicom(p):
        return load_dicom_file(p, name=name, accept_missing_geometry=accept_missing_geometry)
    if p.name.lower().endswith((".nii", ".nii.gz")):
        header = check_nifti_complete(p)
        direct = read_nifti_direct(p, header) if frame in (None, 0) else None
        if direct is not None:  # voxels straight into their float32 array, geometry from ITK
            data, info = direct
            vname = name or volume_name_for(p)
            return Volume(vname, data, affine_from_sitk(info), modality=guess_modality(vname), source=str(p))
    try:
        image = sitk.ReadImage(str(p), sitk.sitkFloat32)
    except RuntimeError as exc:
        reason = sitk_reason(exc)
        code = "truncated_image" if ("fread" in reason or "not read completely" in reason) else "load_failed"
        raise VolumeLoadError(f"cannot read {p.name}: {reason}", code) from exc
    vname = name or volume_name_for(p)
    image, frames = pick_frame(image, vname, frame)
    vol = volume_from_sitk(image, vname, modality=guess_modality(vname), source=str(p))
    if frames > 1:
        vol.metadata.update({"frame": str(frame or 0), "frames": str(frames)})
    return vol




def load_cached(
    path: Path, accept_missing_geometry: bool = False, series_uid: str | None = None, frame: int | None = None
) -> Volume:
    """Load a volume file or DICOM folder, reusing an earlier load of the same unchanged file.

    A DICOM series folder is named after the folder (the case author's name for it); its
    SeriesDescription stays in the volume's metadata.
    """
    vet_volume_file(path)  # before the cache too: what was loaded once is not thereby allowed now
    key = _key(path, accept_missing_geometry, series_uid, frame)
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    name = path.name if path.is_dir() and series_uid is None else None  # a picked series: its description
    vol = load_volume(path, name, accept_missing_geometry, series_uid, frame)
    with _LOCK:
        _CACHE[key] = vol
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return vol


def _is_volume_file(p: Path) -> bool:
    return p.is_file() and (p.name.lower().endswith(VOLUME_SUFFIXES) or p.suffix.lower() == ".dcm" or is_dicom(p))


def expand_case_path(path: Path) -> list[Path]:
    """Volume sources under a path: a file; a DICOM series folder; or a folder's volume files and series."""
    if path.is_file():
        return [path]
    children = sorted(path.iterdir())
    if any(c.is_file() and (c.suffix.lower() == ".dcm" or is_dicom(c)) for c in children):
        return [path]
    found = [c for c in children if c.is_file() and c.name.lower().endswith(VOLUME_SUFFIXES)]
    found += [c for c in children if c.is_dir() and any(_is_volume_file(g) for g in c.iterdir())]
    return found


def load_case_volumes(
    paths: list[Path], accept_missing_geometry: bool = False, series_uid: str | None = None, frame: int | None = None
) -> list[Volume]:
    """Every volume under the given paths, in order (with `series_uid`, that series of a DICOM folder; with
    `frame`, that frame of a 4D file); a refusal named by the loader's code when one fails."""
    sources = [s for p in paths for s in expand_case_path(p)]
    if not sources:
        raise HandlerError("not_found", "no image volumes found at the given path")
    try:
        return [load_cached(s, accept_missing_geometry, series_uid, frame) for s in sources]
    except VolumeLoadError as exc:
        raise HandlerError(exc.code, str(exc)) from exc
    except (RuntimeError, OverflowError, MemoryError) as exc:  # a reader's own failure: one named line, not a 500
        raise HandlerError("load_failed", f"cannot read the image: {sitk_reason(exc)}") from exc
