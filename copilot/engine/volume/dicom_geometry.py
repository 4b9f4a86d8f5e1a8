"""DICOM slice geometry taken as facts: orientation, pixel spacing and each slice's position, checked before a
series becomes a regular volume.

A series is one regular volume only when the slice positions, projected on the slice normal
(ImageOrientationPatient row × column), advance by one step within `SPACING_TOLERANCE` of that step and do
not move within the image plane. The tolerance follows 3D Slicer's DICOMScalarVolumePlugin, which compares
each slice-to-slice distance with the first one and warns ("Images are not equally spaced") when they differ
by more than its `epsilon` of 0.01; here the comparison is relative to the mean step (at least 0.01 mm, for
positions written with few decimals) and applied to every slice's distance from the regular grid as well,
and instead of a warning the series is refused:

- positions that are not uniform (a missing slice, variable spacing): `irregular_slice_spacing`, with the
  positions along the normal listed;
- slices offset within the image plane (gantry tilt): `gantry_tilt`, with the angle;
- two slices at one position, or all at one: `inconsistent_series`;
- PixelSpacing zero, negative or not finite; ImageOrientationPatient zero, not unit length, not orthogonal
  or not finite; positions not finite: `invalid_geometry`. Nothing is replaced by a default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pydicom

from copilot.engine.volume.image import LPS_TO_RAS, Volume, VolumeLoadError

SPACING_TOLERANCE = 0.01  # fraction of the slice step (Slicer's DICOMScalarVolumePlugin epsilon)
ORIENTATION_TOLERANCE = 1e-3  # direction cosines: unit length and orthogonality
PLACEMENT_TOLERANCE_MM = 0.01  # a loaded slice's first voxel against its ImagePositionPatient


def _floats(values: Any, n: int, what: str, name: str) -> np.ndarray:
    """`n` numbers from a DICOM multi-value, or `invalid_geometry` naming the tag."""
    try:
        arr = np.array([float(v) for v in values], dtype=float)
    except (TypeError, ValueError) as exc:
        raise VolumeLoadError(f"{name}: {what} is not numeric ({values!r})", "invalid_geometry") from exc
    if arr.size != n:
        raise VolumeLoadError(f"{name}: {what} holds {arr.size} values, not {n}", "invalid_geometry")
    if not np.isfinite(arr).all():
        raise VolumeLoadError(f"{name}: {what} is not finite ({list(arr)})", "invalid_geometry")
    return arr


def plane_axes(iop: Any, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row direction, column direction and slice normal (LPS) of an ImageOrientationPatient; refuses zero,
    non-unit, non-orthogonal or non-finite cosines (`invalid_geometry`)."""
    cosines = _floats(iop, 6, "ImageOrientationPatient", name)
    row, col = cosines[:3], cosines[3:]
    norms = (float(np.linalg.norm(row)), float(np.linalg.norm(col)))
    if any(abs(n - 1.0) > ORIENTATION_TOLERANCE for n in norms) or abs(float(row @ col)) > ORIENTATION_TOLERANCE:
        raise VolumeLoadError(
            f"{name}: ImageOrientationPatient {list(cosines)} is not two orthogonal unit vectors "
            f"(lengths {norms[0]:.4g}, {norms[1]:.4g}; dot {float(row @ col):.4g})",
            "invalid_geometry",
        )
    row, col = row / norms[0], col / norms[1]
    return row, col, np.cross(row, col)


def pixel_spacing(values: Any, name: str, what: str = "PixelSpacing") -> tuple[float, float]:
    """(row spacing, column spacing) in mm; zero, negative or non-finite values are refused (`invalid_geometry`)."""
    spacing = _floats(values, 2, what, name)
    if (spacing <= 0).any():
        raise VolumeLoadError(f"{name}: {what} {list(spacing)} must be positive", "invalid_geometry")
    return float(spacing[0]), float(spacing[1])


def position(values: Any, name: str) -> np.ndarray:
    """An ImagePositionPatient as three finite numbers (`invalid_geometry` otherwise)."""
    return _floats(values, 3, "ImagePositionPatient", name)


def _fmt(values: Sequence[float], limit: int = 12) -> str:
    shown = ", ".join(f"{v:.2f}" for v in values[:limit])
    return shown + (f", … ({len(values)} in all)" if len(values) > limit else "")


def grid_tolerance(step: float) -> float:
    """How far (mm) a slice may sit from the regular grid: 1 % of the step, at least 0.01 mm (DS rounding)."""
    return max(SPACING_TOLERANCE * abs(step), PLACEMENT_TOLERANCE_MM)


def check_slice_positions(positions: np.ndarray, normal: np.ndarray, name: str) -> tuple[np.ndarray, float]:
    """The slice order along the normal and the slice step (mm) of positions (n × 3, LPS) that form a regular
    grid; refuses duplicates, gaps, variable spacing and in-plane offsets by name."""
    if not np.isfinite(positions).all():
        raise VolumeLoadError(f"{name}: a slice position is not finite", "invalid_geometry")
    dist = positions @ normal
    order = np.argsort(dist, kind="stable")
    d = dist[order]
    n = len(d)
    if n < 2:
        return order, 0.0
    if d[-1] - d[0] < 1e-6:
        raise VolumeLoadError(
            f"{name}: all {n} slices share one position ({d[0]:.2f} mm along the normal)", "inconsistent_series"
        )
    step = float((d[-1] - d[0]) / (n - 1))
    gaps = np.diff(d)
    tol = grid_tolerance(step)
    if (gaps < tol).any():
        dup = [float(d[i]) for i in np.nonzero(gaps < tol)[0]]
        raise VolumeLoadError(
            f"{name}: {len(dup)} pair(s) of slices share a position (at {_fmt(dup)} mm along the normal): "
            "two acquisitions or repeated slices in one series",
            "inconsistent_series",
        )
    off_grid = np.abs(d - (d[0] + step * np.arange(n)))
    if off_grid.max() > tol or np.abs(gaps - step).max() > tol:
        raise VolumeLoadError(
            f"{name}: slice positions are not evenly spaced (slice gaps {_fmt(sorted(set(np.round(gaps, 2))))} mm; "
            f"positions along the normal {_fmt(list(d))} mm); a regular volume would place slices where they "
            "were not acquired",
            "irregular_slice_spacing",
        )
    along = positions[order] - positions[order[0]]
    in_plane = along - np.outer(along @ normal, normal)
    shift = float(np.linalg.norm(in_plane, axis=1).max())
    if shift > max(tol, PLACEMENT_TOLERANCE_MM):
        angle = float(np.degrees(np.arctan2(shift, d[-1] - d[0])))
        raise VolumeLoadError(
            f"{name}: slices move {shift:.2f} mm within the image plane over the series (gantry tilt of "
            f"{angle:.1f}°); a volume with axes along the image plane would misplace them",
            "gantry_tilt",
        )
    return order, step


def header_frames(ds: pydicom.Dataset, name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(positions n × 3, IOP) of every frame a multi-frame file describes (enhanced per-frame
    functional groups, or RT Dose GridFrameOffsetVector); None when the file has no per-frame positions."""
    shared = (ds.get("SharedFunctionalGroupsSequence") or [None])[0]
    per_frame = list(ds.get("PerFrameFunctionalGroupsSequence") or [])
    if per_frame:

        def group(item: Any, seq: str, tag: str) -> Any:
            for source in (item, shared):
                if source is not None and seq in source and source[seq].value and tag in source[seq].value[0]:
                    return source[seq].value[0].get(tag)
            return None

        iops = {tuple(group(f, "PlaneOrientationSequence", "ImageOrientationPatient") or ()) for f in per_frame}
        if len(iops) > 1:
            raise VolumeLoadError(f"{name}: frames with {len(iops)} different orientations", "inconsistent_series")
        raw = [group(f, "PlanePositionSequence", "ImagePositionPatient") for f in per_frame]
        spacing = group(per_frame[0], "PixelMeasuresSequence", "PixelSpacing")
        if any(r is None for r in raw) or not next(iter(iops)) or spacing is None:
            return None
        iop = np.array(next(iter(iops)), dtype=float)
        pixel_spacing(spacing, name)
        return np.array([position(r, name) for r in raw]), iop
    offsets = ds.get("GridFrameOffsetVector")
    if offsets and ds.get("ImagePositionPatient") and ds.get("ImageOrientationPatient"):
        _, _, normal = plane_axes(ds.ImageOrientationPatient, name)
        off = _floats(offsets, len(list(offsets)), "GridFrameOffsetVector", name)
        origin = position(ds.ImagePositionPatient, name)
        if off[0] != 0:  # absolute offsets: distances along the normal from the origin of patient space
            off = off - float(origin @ normal)
        iop = np.array([float(v) for v in ds.ImageOrientationPatient])
        pixel_spacing(ds.PixelSpacing, name)
        return origin + np.outer(off, normal), iop
    return None


def frame_pixel_spacing(ds: pydicom.Dataset, name: str) -> tuple[float, float]:
    """PixelSpacing of a dataset: its own tag, else the shared or first per-frame Pixel Measures."""
    if ds.get("PixelSpacing"):
        return pixel_spacing(ds.PixelSpacing, name)
    for seq in ("SharedFunctionalGroupsSequence", "PerFrameFunctionalGroupsSequence"):
        for group in list(ds.get(seq) or [])[:1]:
            measures = list(group.get("PixelMeasuresSequence") or [])
            if measures and measures[0].get("PixelSpacing"):
                return pixel_spacing(measures[0].PixelSpacing, name)
    raise VolumeLoadError(f"{name}: no PixelSpacing", "missing_geometry")


def series_frames(headers: list[pydicom.Dataset], name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(positions n × 3, IOP) of a single-frame series after checking every slice's orientation, spacing and
    position; None when a header lacks them (the caller decides on an assumed geometry)."""
    if any(not h.get("ImagePositionPatient") or not h.get("ImageOrientationPatient") for h in headers):
        return None
    for h in headers:
        plane_axes(h.ImageOrientationPatient, name)
        if h.get("PixelSpacing"):
            pixel_spacing(h.PixelSpacing, name)
    return np.array([position(h.ImagePositionPatient, name) for h in headers]), np.array(
        [float(v) for v in headers[0].ImageOrientationPatient]
    )


def check_frames(positions: np.ndarray, iop: np.ndarray, name: str) -> tuple[np.ndarray, float]:
    """Order and step of regular frames (see `check_slice_positions`)."""
    _, _, normal = plane_axes(iop, name)
    return check_slice_positions(positions, normal, name)


def verify_placement(vol: Volume, positions: np.ndarray, name: str) -> None:
    """Refuse a loaded volume whose slices are not at their ImagePositionPatient (within the grid tolerance,
    0.01 mm for steps up to 1 mm): the reader's geometry is checked against the headers, not trusted."""
    k = np.arange(vol.dimensions[2], dtype=float)
    first_voxels = (vol.ijk_to_ras @ np.stack([np.zeros_like(k), np.zeros_like(k), k, np.ones_like(k)]))[:3].T
    expected = (LPS_TO_RAS @ positions.T).T
    if len(expected) != len(first_voxels):
        raise VolumeLoadError(
            f"{name}: the reader returned {len(first_voxels)} slices for {len(expected)} positions", "invalid_geometry"
        )
    err = np.linalg.norm(first_voxels[:, None, :] - expected[None, :, :], axis=2).min(axis=1)
    scale = max(1.0, float(np.abs(expected).max()))
    if err.max() > grid_tolerance(vol.spacing[2]) + 1e-6 * scale:
        worst = int(err.argmax())
        raise VolumeLoadError(
            f"{name}: slice {worst} would be shown {err[worst]:.3f} mm from its ImagePositionPatient",
            "invalid_geometry",
        )
