"""The automatic window against 3D Slicer's own (vtkMRMLScalarVolumeDisplayNode auto window/level) on images where
a percentile rule can collapse."""

from __future__ import annotations

from importlib.util import find_spec

import numpy as np
import pytest

from copilot.engine.volume.display import default_display
from copilot.engine.volume.image import Volume

if find_spec("slicer") is None:  # present-or-not without importing it at collection
    pytest.skip("needs slicer-core", allow_module_level=True)


@pytest.mark.parametrize(("low", "high"), [(-900.0, 300.0), (0.0, 1.0), (40.0, 41.0)])
def test_two_valued_image_window_matches_slicer(low: float, high: float) -> None:
    from copilot.slicer_backend.viewer import SlicerSceneViewer

    data = np.full((3, 128, 128), low, np.float32)
    data[:, 40:80, 40:80] = high
    vol = Volume("two", data, np.diag([-0.66, -0.66, 5.0, 1.0]), "CT")
    viewer = SlicerSceneViewer()
    display = viewer.volume_node(viewer.add_volume(vol)).GetDisplayNode()
    display.SetAutoWindowLevel(1)
    ours = default_display(vol)
    span = high - low
    assert ours.window == pytest.approx(display.GetWindow(), abs=0.01 * span)
    assert ours.level == pytest.approx(display.GetLevel(), abs=0.01 * span)
