"""The legacy renderer's sampling (`pillow-affine-1`, what traces that name no renderer were drawn with): a
view's image by Pillow's affine transform of the windowed slab when the view plane is a voxel plane of the volume
(whatever the in-plane flips, swaps and spacing), by SimpleITK's trilinear `Resample` onto the view's grid for any
other (oblique) geometry. Outside the volume (beyond half a voxel from the outer voxel centres) the image is black
(0), whatever the window.
"""

from __future__ import annotations

import numpy as np
import SimpleITK as sitk

from copilot.engine.volume.display import to_uint8
from copilot.engine.volume.image import LPS_TO_RAS, Volume, sitk_image
from copilot.engine.volume.voxel_plane import OUTSIDE, affine_plane, image_to_ijk

_EPS = 1e-9


def reslice_uint8(
    volume: Volume, image_to_ras: np.ndarray, size: tuple[int, int], window: float, level: float
) -> np.ndarray:
    """Windowed 8-bit image (H×W) of the volume on the given image grid."""
    m = image_to_ijk(volume, image_to_ras)
    ax, ay = m[:3, 0], m[:3, 1]
    for normal_axis in range(3):
        if abs(ax[normal_axis]) < _EPS and abs(ay[normal_axis]) < _EPS:
            return affine_plane(volume, normal_axis, m, size, window, level)
    return _reslice_general(volume, image_to_ras, size, window, level)


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


def _reslice_general(
    volume: Volume, image_to_ras: np.ndarray, size: tuple[int, int], window: float, level: float
) -> np.ndarray:
    """Trilinear sampling by SimpleITK `Resample` onto a one-slice grid with the view's geometry."""
    ref = view_grid(image_to_ras, size)
    out = sitk.Resample(sitk_image(volume), ref, sitk.Transform(), sitk.sitkLinear, OUTSIDE, sitk.sitkFloat32)
    values = sitk.GetArrayViewFromImage(out)[0]
    outside = values <= OUTSIDE / 2
    return to_uint8(np.where(outside, np.float32(level - window / 2.0), values), window, level)
