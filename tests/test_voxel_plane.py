"""The windowed slab in one compiled pass is `to_uint8` of the interpolated slab, byte for byte: along every voxel
axis, on voxel centres and between them, at the half-voxel borders and beyond (None), at narrow and wide windows,
with NaN, infinities and the float32 extremes among the voxels."""

from __future__ import annotations

import numpy as np
import pytest

from copilot.engine.volume import compiled, voxel_plane
from copilot.engine.volume.display import to_uint8
from copilot.engine.volume.image import Volume

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba is not installed")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's own path casts NaN and overflows on the way
def test_the_compiled_windowed_slab_is_the_windowed_slab() -> None:
    data = np.random.default_rng(0).normal(0, 800, (20, 30, 25)).astype(np.float32)
    data[0, 0, :5] = [np.nan, np.inf, -np.inf, 3e38, -3e38]
    volume = Volume("noise", data, np.diag([0.8, 0.8, 2.0, 1.0]))
    checked = 0
    for axis in range(3):
        n = volume.dimensions[axis]
        for index in [*np.linspace(-0.6, n - 0.4, 23).tolist(), 0.0, 0.5, n - 1.0, n - 0.5, 2.9999999, 3.0000001]:
            for window, level in ((400.0, 40.0), (1e-9, 5.0), (5000.0, -1000.0), (255.0, 127.5)):
                plane = voxel_plane.slab(volume, axis, index)
                drawn = voxel_plane.windowed_slab(volume, axis, index, window, level)
                if plane is None:
                    assert drawn is None, (axis, index)
                    continue
                assert drawn is not None and np.array_equal(drawn, to_uint8(plane, window, level)), (axis, index)
                checked += 1
    assert checked > 200
