"""The DICOM image behind each slice of a volume loaded from DICOM: which instance, and which frame of it.

Exports (SEG, measurement reports) reference their source images by SOP instance and, for a multi-frame
instance (enhanced CT/MR/PET, RT Dose), by frame number. Slices are matched to the instances' stated positions
(ImagePositionPatient, per-frame Plane Position, or an RT Dose grid), so the match holds whatever order the
files lie in; a volume whose slices do not each match one stated position has no sources (None).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pydicom
import SimpleITK as sitk

from copilot.engine.volume import dicom_geometry as geo
from copilot.engine.volume.dicom_multiframe import frame_count
from copilot.engine.volume.image import LPS_TO_RAS, VolumeLoadError


@dataclass(frozen=True)
class SourceFrame:
    """One slice's source: the instance and, in a multi-frame instance, the frame (1-based; None otherwise)."""

    dataset: pydicom.Dataset
    frame: int | None


def _files(volume: Any) -> list[str]:
    """The files of the volume's series: its own file, or the series' files in its folder."""
    source = Path(str(getattr(volume, "source", "") or ""))
    uid = volume.metadata.get("SeriesInstanceUID")
    if not uid or not str(source):
        return []
    if source.is_file():
        return [str(source)]
    if source.is_dir():
        return list(sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(source), uid))
    return []


def _stated(ds: pydicom.Dataset, name: str) -> list[tuple[np.ndarray, int | None]]:
    """The RAS position of each image a dataset holds, with its frame number when it is multi-frame."""
    if frame_count(ds) > 1:
        frames = geo.header_frames(ds, name)
        if frames is None:
            return []
        return [(LPS_TO_RAS @ p, n + 1) for n, p in enumerate(frames[0])]
    if not ds.get("ImagePositionPatient"):
        return []
    return [(LPS_TO_RAS @ geo.position(ds.ImagePositionPatient, name), None)]


def source_frames(volume: Any, with_pixels: bool = False) -> list[SourceFrame] | None:
    """The source of each slice k of a DICOM-loaded volume, in k order; None when the volume has none."""
    files = _files(volume)
    if not files:
        return None
    try:
        datasets = [pydicom.dcmread(f, stop_before_pixels=not with_pixels) for f in files]
        stated = [(pos, ds, frame) for ds in datasets for pos, frame in _stated(ds, volume.name)]
    except (OSError, ValueError, VolumeLoadError, pydicom.errors.InvalidDicomError):
        return None
    depth = volume.dimensions[2]
    if len(stated) != depth:
        return None
    corners = (volume.ijk_to_ras @ np.stack([np.zeros(depth), np.zeros(depth), np.arange(depth), np.ones(depth)]))
    tolerance = geo.grid_tolerance(volume.spacing[2]) + 1e-3
    out: list[SourceFrame] = []
    for k in range(depth):
        dist = [float(np.linalg.norm(corners[:3, k] - pos)) for pos, _, _ in stated]
        best = int(np.argmin(dist))
        if dist[best] > tolerance:
            return None
        out.append(SourceFrame(stated[best][1], stated[best][2]))
    if len({(id(s.dataset), s.frame) for s in out}) != depth:
        return None
    return out
