"""The compiled bilinear affine transform gives Pillow's bytes: scaled, flipped, swapped and rotated maps, maps that
land on pixel centres and edges, sources of one row or column, points outside the source (black);
and the voxel-plane views drawn through it are the views Pillow draws (fitted zoomed-out CT panes among them)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from copilot.engine.volume import affine2d, voxel_plane
from copilot.engine.volume.display import to_uint8
from copilot.engine.volume.image import Volume

pytestmark = pytest.mark.skipif(not affine2d.available(), reason="numba is not installed")


def _pillow(src: np.ndarray, coeffs: tuple[float, ...], size: tuple[int, int]) -> np.ndarray:
    image = Image.fromarray(src).transform(size, Image.Transform.AFFINE, coeffs, resample=Image.Resampling.BILINEAR)
    return np.asarray(image)


def _maps(rng: np.random.Generator) -> list[tuple[float, ...]]:
    """Scales with flips (signed zero cross terms among them), swaps, general maps, and maps on halves of a pixel
    (points on centres and edges)."""
    maps: list[tuple[float, ...]] = []
    for _ in range(12):
        s, t = rng.uniform(-3, 3, 2)
        u, v = rng.uniform(-40, 260, 2)
        a, b, d, e = rng.uniform(-2, 2, 4)
        maps += [(s, 0.0, u, 0.0, t, v), (0.0, s, u, t, 0.0, v), (a, b, u, d, e, v), (s, -0.0, -0.0, -0.0, t, 0.0)]
        maps.append((float(rng.integers(-2, 3)) / 2 or 1.0, 0.0, float(rng.integers(-4, 200)) + 0.5,
                     0.0, float(rng.integers(-2, 3)) / 2 or 1.0, float(rng.integers(-4, 200))))  # fmt: skip
    return maps


@pytest.mark.parametrize("shape", [(200, 230), (1, 57), (64, 1), (3, 2)])
def test_the_compiled_transform_gives_pillows_bytes(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(shape))
    noise = rng.integers(0, 256, shape, dtype=np.uint8)
    ramp = (np.add.outer(np.arange(shape[0]), 3 * np.arange(shape[1])) % 256).astype(np.uint8)
    for src in (noise, ramp):
        for n, coeffs in enumerate(_maps(rng)):
            size = (int(rng.integers(1, 300)), int(rng.integers(1, 300)))
            got = affine2d.affine_uint8(src, coeffs, size)
            assert got.shape == (size[1], size[0]) and got.dtype == np.uint8
            assert np.array_equal(got, _pillow(src, coeffs, size)), (shape, n, coeffs, size)


def test_voxel_plane_views_are_the_views_pillow_draws() -> None:
    """A CT-like volume in a pane zoomed out below a pixel per voxel, flipped, and rotated within the plane."""
    rng = np.random.default_rng(2)
    data = rng.normal(40, 300, (40, 120, 110)).astype(np.float32)
    m = np.diag([-0.8, 0.8, 2.0, 1.0])
    volume = Volume("CT", data, m)
    window, level = 400.0, 40.0
    maps = [
        np.array([[1.67, 0, 0, -1.3], [0, -1.67, 0, 118.2], [0, 0, 0, 20.0], [0, 0, 0, 1]]),  # axial, zoomed out
        np.array([[0, 0.9, 0, 3.1], [-0.2, 0, 0, 60.0], [0, 0, 0, 7.4], [0, 0, 0, 1]]),  # swapped axes
        np.array([[0.8, 0.3, 0, -5.0], [-0.3, 0.8, 0, 20.0], [0, 0, 0, 12.5], [0, 0, 0, 1]]),  # rotated in plane
    ]
    for wanted in maps:
        ijk = voxel_plane.image_to_ijk(volume, volume.ijk_to_ras @ wanted)  # the map a view of that geometry has
        plane = voxel_plane.slab(volume, 2, float(ijk[2, 3]))
        assert plane is not None
        coeffs = (ijk[0, 0], ijk[0, 1], ijk[0, 3] + 0.5, ijk[1, 0], ijk[1, 1], ijk[1, 3] + 0.5)
        expected = _pillow(to_uint8(plane, window, level), coeffs, (306, 417))
        drawn = voxel_plane.affine_plane(volume, 2, ijk, (306, 417), window, level)
        assert np.array_equal(drawn, expected)
        assert 0 < int((drawn > 0).sum()) < drawn.size  # part inside the slab, part black
