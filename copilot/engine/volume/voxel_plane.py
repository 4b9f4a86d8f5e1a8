"""What every slice renderer shares: the view's pixel → IJK map, one slab interpolated along a voxel axis, and
Pillow's affine resampling of a windowed slab onto a voxel-plane view (the legacy renderer's route for every
voxel plane, the current one's for views rotated in plane or zoomed out below a pixel per voxel; compiled by
`affine2d` where numba is installed, with Pillow's bytes)."""

from __future__ import annotations

import numpy as np
from PIL import Image

from copilot.engine.volume import affine2d, compiled
from copilot.engine.volume.display import to_uint8
from copilot.engine.volume.image import Volume

OUTSIDE = float(-np.finfo(np.float32).max)  # below any window: outside the volume is black, as in Slicer


def image_to_ijk(volume: Volume, image_to_ras: np.ndarray) -> np.ndarray:
    """4×4 map from image coordinates (x, y, 0, 1) to continuous IJK."""
    return volume.ras_to_ijk @ image_to_ras


def slab(volume: Volume, axis: int, index: float) -> np.ndarray | None:
    """Linearly interpolated 2D slab at a continuous index along IJK `axis` (None when outside)."""
    n = volume.dimensions[axis]
    if index < -0.5 or index > n - 0.5:
        return None
    index = min(max(index, 0.0), n - 1.0)
    lo = int(np.floor(index))
    t = index - lo
    take = [slice(None)] * 3
    data_axis = 2 - axis  # data is [k, j, i]
    take[data_axis] = lo  # type: ignore[call-overload]
    plane = volume.data[tuple(take)]
    if t > 1e-6 and lo + 1 < n:
        take[data_axis] = lo + 1  # type: ignore[call-overload]
        plane = plane * np.float32(1.0 - t) + volume.data[tuple(take)] * np.float32(t)
    return plane


def windowed_slab(volume: Volume, axis: int, index: float, window: float, level: float) -> np.ndarray | None:
    """`to_uint8` of `slab` (None when outside), in one compiled pass over the voxels where numba is installed: the
    same single-precision products, sum, window and clip, with no float slab in between."""
    n = volume.dimensions[axis]
    if not compiled.available() or index < -0.5 or index > n - 0.5:
        plane = slab(volume, axis, index)
        return None if plane is None else to_uint8(plane, window, level)
    index = min(max(index, 0.0), n - 1.0)
    lo = int(np.floor(index))
    t = index - lo
    take: list[slice | int] = [slice(None)] * 3
    take[2 - axis] = lo  # data is [k, j, i]
    first = volume.data[tuple(take)]
    blend = t > 1e-6 and lo + 1 < n
    take[2 - axis] = lo + 1 if blend else lo
    out = np.empty(first.shape, dtype=np.uint8)
    low, scale = np.float32(level - window / 2.0), np.float32(255.0 / max(window, 1e-12))
    compiled.compiled(_window)(first, volume.data[tuple(take)], blend, np.float32(1.0 - t), np.float32(t), low,
                               scale, out)  # fmt: skip
    return out


def _window(
    a: np.ndarray, b: np.ndarray, blend: bool, wa: np.float32, wb: np.float32, low: np.float32, scale: np.float32,
    out: np.ndarray,
) -> None:  # fmt: skip
    """The kernel: a·wa + b·wb (or a alone), less `low`, times `scale`, clipped to 0–255 and truncated, all in single
    precision as numpy computes `slab` and `to_uint8` (NaN: 0, as numpy's cast gives)."""
    rows, cols = a.shape
    for r in range(rows):
        for c in range(cols):
            v = a[r, c] * wa + b[r, c] * wb if blend else a[r, c]
            grey = (v - low) * scale
            if grey >= 255.0:
                out[r, c] = 255
            elif grey > 0.0:
                out[r, c] = np.uint8(grey)
            else:
                out[r, c] = 0


def affine_plane(
    volume: Volume,
    axis: int,
    m: np.ndarray,
    size: tuple[int, int],
    window: float,
    level: float,
) -> np.ndarray:
    """Windowed 8-bit image (H×W) of a voxel-plane view (`m`: its pixel → IJK map, whose `axis` row is constant):
    the slab windowed, then resampled bilinearly by Pillow's affine transform (black beyond the slab)."""
    w, h = size
    ax, ay, origin = m[:3, 0], m[:3, 1], m[:3, 3]
    src = windowed_slab(volume, axis, float(origin[axis]), window, level)
    if src is None:
        return np.zeros((h, w), dtype=np.uint8)
    # slab rows/cols are the two remaining IJK axes in data order: rows = higher axis, cols = lower
    col_axis, row_axis = [a for a in range(3) if a != axis]
    # Pillow maps output (x, y) → input (a x + b y + c, d x + e y + f), pixel centres at +0.5.
    coeffs = (
        float(ax[col_axis]),
        float(ay[col_axis]),
        float(origin[col_axis] + 0.5),
        float(ax[row_axis]),
        float(ay[row_axis]),
        float(origin[row_axis] + 0.5),
    )
    if affine2d.available():  # Pillow's bytes, compiled
        return affine2d.affine_uint8(src, coeffs, size)
    out = Image.fromarray(src).transform((w, h), Image.Transform.AFFINE, coeffs, resample=Image.Resampling.BILINEAR)
    return np.asarray(out)
