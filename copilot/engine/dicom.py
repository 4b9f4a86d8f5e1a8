"""DICOM loading: SimpleITK (GDCM) for series, pydicom where SimpleITK cannot read the files.

The pydicom path builds the geometry straight from ImagePositionPatient, ImageOrientationPatient
and PixelSpacing, sorting slices along the slice normal, and applies the rescale slope/intercept.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
import SimpleITK as sitk

from copilot.engine.volume import LPS_TO_RAS, Volume, VolumeLoadError, volume_from_sitk

MODALITY_NAMES = {"PT": "PT", "CT": "CT", "MR": "MR"}


def _series_name(ds: pydicom.Dataset, fallback: str) -> str:
    """Scene name of a series: its description, else its number, else the folder name."""
    desc = str(getattr(ds, "SeriesDescription", "") or "").strip()
    if desc:
        return desc
    number = getattr(ds, "SeriesNumber", None)
    return f"Series {number}" if number is not None else fallback


def _modality(ds: pydicom.Dataset) -> str:
    return MODALITY_NAMES.get(str(getattr(ds, "Modality", "MR")), "MR")


def _metadata(ds: pydicom.Dataset) -> dict[str, str]:
    keys = ("Modality", "SeriesDescription", "SeriesInstanceUID", "StudyInstanceUID", "SeriesNumber")
    return {k: str(getattr(ds, k)) for k in keys if getattr(ds, k, None) is not None}


def load_dicom_file(path: Path, name: str | None = None) -> Volume:
    """One DICOM file (single- or multi-frame) as a volume."""
    ds = pydicom.dcmread(str(path), stop_before_pixels=True)
    vname = name or _series_name(ds, path.stem)
    try:
        image = sitk.ReadImage(str(path), sitk.sitkFloat32)
        vol = volume_from_sitk(image, vname, modality=_modality(ds), source=str(path))
    except RuntimeError:
        vol = volume_from_datasets([pydicom.dcmread(str(path))], vname, source=str(path))
    vol.metadata.update(_metadata(ds))
    return vol


def load_dicom_series(folder: Path, name: str | None = None, series_uid: str | None = None) -> Volume:
    """The first (or the given) series found in a folder, read with SimpleITK, pydicom as fallback."""
    reader = sitk.ImageSeriesReader()
    uids = list(reader.GetGDCMSeriesIDs(str(folder)) or [])
    if series_uid is not None:
        if series_uid not in uids:
            raise VolumeLoadError(f"series {series_uid} not found in {folder.name}")
        uids = [series_uid]
    files: list[str] = []
    if uids:
        files = list(reader.GetGDCMSeriesFileNames(str(folder), uids[0]))
    if not files:
        files = sorted(str(p) for p in folder.iterdir() if p.is_file())
    if not files:
        raise VolumeLoadError(f"no DICOM files in {folder.name}")
    try:
        first = pydicom.dcmread(files[0], stop_before_pixels=True)
    except pydicom.errors.InvalidDicomError as exc:
        raise VolumeLoadError(f"{folder.name}: not DICOM ({exc})") from exc
    vname = name or _series_name(first, folder.name)
    try:
        reader.SetFileNames(files)
        reader.SetOutputPixelType(sitk.sitkFloat32)
        vol = volume_from_sitk(reader.Execute(), vname, modality=_modality(first), source=str(folder))
    except RuntimeError:
        vol = volume_from_datasets([pydicom.dcmread(f) for f in files], vname, source=str(folder))
    vol.metadata.update(_metadata(first))
    return vol


def volume_from_datasets(datasets: list[pydicom.Dataset], name: str, source: str = "") -> Volume:
    """Build a volume from single-frame datasets using their patient-space geometry (pydicom)."""
    if not datasets:
        raise VolumeLoadError(f"{name}: no slices")
    first = datasets[0]
    try:
        iop = np.array([float(v) for v in first.ImageOrientationPatient])
        spacing_rc = [float(v) for v in first.PixelSpacing]
    except AttributeError as exc:
        raise VolumeLoadError(f"{name}: missing patient geometry ({exc})") from exc
    row_dir, col_dir = iop[:3], iop[3:]
    normal = np.cross(row_dir, col_dir)
    datasets = sorted(datasets, key=lambda d: float(np.dot(normal, [float(v) for v in d.ImagePositionPatient])))
    positions = np.array([[float(v) for v in d.ImagePositionPatient] for d in datasets])
    if len(datasets) > 1:
        slice_step = float(np.median(np.diff(positions @ normal)))
    else:
        slice_step = float(getattr(first, "SpacingBetweenSlices", 0) or getattr(first, "SliceThickness", 1) or 1)
    frames = []
    for d in datasets:
        arr = d.pixel_array.astype(np.float32)
        arr = arr * float(getattr(d, "RescaleSlope", 1) or 1) + float(getattr(d, "RescaleIntercept", 0) or 0)
        frames.append(arr)
    data = np.stack(frames)  # [k, row(j), column(i)]
    # Column index i advances along the row direction by the column spacing (PixelSpacing[1]).
    lps = np.eye(4)
    lps[:3, 0] = row_dir * spacing_rc[1]
    lps[:3, 1] = col_dir * spacing_rc[0]
    lps[:3, 2] = normal * slice_step
    lps[:3, 3] = positions[0]
    ras = np.eye(4)
    ras[:3, :] = LPS_TO_RAS @ lps[:3, :]
    vol = Volume(name=name, data=data, ijk_to_ras=ras, modality=_modality(first), source=source)
    vol.metadata.update(_metadata(first))
    return vol
