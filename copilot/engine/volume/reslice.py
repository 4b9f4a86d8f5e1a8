"""Reslicing a volume onto a view's image grid, with linear interpolation.

The image→IJK map is affine. When the view plane is a voxel plane of the volume (the usual
axis-aligned case, whatever the in-plane flips, swaps and spacing), one 2D slab is taken,
interpolated along the normal, windowed to 8 bits and resampled in 2D by Pillow's affine
transform. Any other (oblique) geometry is sampled trilinearly by SimpleITK (multi-threaded ITK).
Outside the volume (beyond half a voxel from the outer voxel centres) the image is black (0), whatever
the window.
"""

from __future__ import annotations

import numpy as np
import SimpleITK as sitk
from PIL import Image

from copilot.engine.volume.display import to_uint8
from copilot.engine.volume.image import LPS_TO_RAS, Volume, volume_to_sitk

_EPS = 1e-9
OUTSIDE = float(-np.finfo(np.float32).max)  # below any window: outside the volume is black, as in Slicer


def image_to_ijk(volume: Volume, image_to_ras: np.ndarray) -> np.ndarray:
    """4×4 map from image coordinates (x, y, 0, 1) to continuous IJK."""
    return volume.ras_to_ijk @ image_to_ras


def reslice_uint8(
    volume: Volume, image_to_ras: np.ndarray, size: tuple[int, int], window: float, level: float
) -> np.ndarray:
    """Windowed 8-bit image (H×W) of the volume on the given image grid."""
    m = image_to_ijk(volume, image_to_ras)
    ax, ay, origin = m[:3, 0], m[:3, 1], m[:3, 3]
    for normal_axis in range(3):
        if abs(ax[normal_axis]) < _EPS and abs(ay[normal_axis]) < _EPS:
            return _reslice_voxel_plane(volume, normal_axis, ax, ay, origin, size, window, level)
    return _reslice_general(volume, image_to_ras, size, window, level)


def _slab(volume: Volume, axis: int, index: float) -> np.ndarray | None:
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
    slab = volume.data[tuple(take)]
    if t > 1e-6 and lo + 1 < n:
        take[data_axis] = lo + 1  # type: ignore[call-overload]
        slab = slab * np.float32(1.0 - t) + volume.data[tuple(take)] * np.float32(t)
    return slab


def _reslice_voxel_plane(
    volume: Volume,
    axis: int,
    ax: np.ndarray,
    ay: np.ndarray,
    origin: np.ndarray,
    size: tuple[int, int],
    window: float,
    level: float,
) -> np.ndarray:
    w, h = size
    slab = _slab(volume, axis, float(origin[axis]))
    if slab is None:
        return np.zeros((h, w), dtype=np.uint8)
    # slab rows/cols are the two remaining IJK axes in data order: rows = higher axis, cols = lower
    col_axis, row_axis = [a for a in range(3) if a != axis]
    src = Image.fromarray(to_uint8(slab, window, level))
    # Pillow maps output (x, y) → input (a x + b y + c, d x + e y + f), pixel centres at +0.5.
    coeffs = (
        ax[col_axis],
        ay[col_axis],
        origin[col_axis] + 0.5,
        ax[row_axis],
        ay[row_axis],
        origin[row_axis] + 0.5,
    )
    out = src.transform((w, h), Image.Transform.AFFINE, coeffs, resample=Image.Resampling.BILINEAR)
    return np.asarray(out)


def view_grid(image_to_ras: np.ndarray, size: tuple[int, int]) -> sitk.Image:
    """A one-slice SimpleITK image (LPS geometry) whose voxels are the pixels of the view's image."""
    w, h = size
    m = image_to_ras
    s = float(np.linalg.norm(m[:3, 0]))
    origin_ras = m[:3, 3] + 0.5 * m[:3, 0] + 0.5 * m[:3, 1]  # centre of pixel (0, 0)
    cols = np.stack([m[:3, 0] / s, m[:3, 1] / s, m[:3, 2] / np.linalg.norm(m[:3, 2])], axis=1)
    cols[np.abs(cols) < 1e-12] = 0.0
    ref = sitk.Image([w, h, 1], sitk.sitkFloat32)
    ref.SetSpacing((s, s, 1.0))
    ref.SetOrigin(tuple(float(v) for v in LPS_TO_RAS @ origin_ras))
    ref.SetDirection(tuple(float(v) for v in (LPS_TO_RAS @ cols).ravel()))
    return ref


def sitk_image(volume: Volume) -> sitk.Image:
    """The volume as a SimpleITK image, made once per volume."""
    image = volume.cache.get("sitk")
    if image is None:
        image = volume.cache["sitk"] = volume_to_sitk(volume)
    return image  # type: ignore[return-value]


def _reslice_general(
    volume: Volume, image_to_ras: np.ndarray, size: tuple[int, int], window: float, level: float
) -> np.ndarray:
    """Trilinear sampling by SimpleITK `Resample` onto a one-slice grid with the view's geometry."""
    ref = view_grid(image_to_ras, size)
    out = sitk.Resample(sitk_image(volume), ref, sitk.Transform(), sitk.sitkLinear, OUTSIDE, sitk.sitkFloat32)
    values = sitk.GetArrayViewFromImage(out)[0]
    outside = values <= OUTSIDE / 2
    return to_uint8(np.where(outside, np.float32(level - window / 2.0), values), window, level)
