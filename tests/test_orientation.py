"""View orientation matches 3D Slicer: matrices pinned, and markers land where Slicer shows them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from scipy import ndimage

from copilot.engine.geometry import ORIENTATION_MATRICES
from copilot.engine.volume.image import volume_to_sitk
from copilot.engine.volume.loading import load_volume
from copilot.engine.volume.viewer import EmbeddedVolumeViewer
from tests.conftest import make_volume


def test_orientation_matrices_are_slicers() -> None:
    # Slicer 5's vtkMRMLSliceNode::GetAxialSliceToRASMatrix / GetSagittalSliceToRASMatrix /
    # GetCoronalSliceToRASMatrix (radiological, patientRightIsScreenLeft=true): element (row, column).
    # Slicer >= 5.0's sagittal normal is L (Slicer 4.x used R). tests/test_slicer_reference.py checks the
    # same matrices against slicer-core itself.
    expected = {
        "axial": {(0, 0): -1, (1, 1): 1, (2, 2): 1},
        "sagittal": {(1, 0): -1, (2, 1): 1, (0, 2): -1},
        "coronal": {(0, 0): -1, (2, 1): 1, (1, 2): 1},
    }
    for name, entries in expected.items():
        m = np.zeros((3, 3))
        for (r, c), v in entries.items():
            m[r, c] = v
        assert np.array_equal(ORIENTATION_MATRICES[name], m), name


def asymmetric_volume():
    """40 mm cube centred on the origin with markers on the patient's Right, Anterior and Superior sides."""
    vol = make_volume(dims=(41, 41, 41), origin=(-20.0, -20.0, -20.0), name="markers")
    d = vol.data  # [k=S, j=A, i=R] with identity direction
    d[18:23, 18:23, 33:38] = 300.0  # right  (R = +13..+17)
    d[18:23, 33:38, 18:23] = 600.0  # anterior (A = +13..+17)
    d[33:38, 18:23, 18:23] = 900.0  # superior (S = +13..+17)
    vol.__post_init__()
    return vol


def _marker_side(image: np.ndarray, value: float, window=(1200.0, 600.0)) -> tuple[float, float]:
    """Centroid (x, y), as a fraction of the image, of the largest region showing the marker's grey value.

    Markers map to mid-grey levels; overlay text is white, so it never matches.
    """
    target = (value - (window[1] - window[0] / 2)) / window[0] * 255
    labels, n = ndimage.label(np.abs(image.astype(float) - target) < 4)
    assert n > 0, f"marker {value} not visible"
    sizes = ndimage.sum(np.ones_like(labels), labels, index=range(1, n + 1))
    ys, xs = np.nonzero(labels == 1 + int(np.argmax(sizes)))
    assert xs.size > 50
    return xs.mean() / image.shape[1], ys.mean() / image.shape[0]


@pytest.fixture
def viewer() -> EmbeddedVolumeViewer:
    v = EmbeddedVolumeViewer()
    vid = v.add_volume(asymmetric_volume())
    v.recover_standard_views(vid)
    v.set_window_level(vid, 1200.0, 600.0)
    return v


def _render_at(viewer: EmbeddedVolumeViewer, view: str, offset: float) -> np.ndarray:
    viewer.set_slice_offset(view, offset)
    return np.asarray(viewer.render(view, (256, 256)))


def test_axial_patient_right_on_screen_left_and_anterior_up(viewer: EmbeddedVolumeViewer) -> None:
    img = _render_at(viewer, "red", 0.0)
    rx, ry = _marker_side(img, 300)
    ax, ay = _marker_side(img, 600)
    assert rx < 0.4 and 0.4 < ry < 0.6  # patient right → screen left, so patient left is on screen right
    assert ay < 0.4 and 0.4 < ax < 0.6  # anterior at the top


def test_coronal_patient_right_on_screen_left_and_superior_up(viewer: EmbeddedVolumeViewer) -> None:
    img = _render_at(viewer, "green", 0.0)
    rx, _ = _marker_side(img, 300)
    _, sy = _marker_side(img, 900)
    assert rx < 0.4
    assert sy < 0.4


def test_sagittal_superior_up_and_anterior_on_screen_left(viewer: EmbeddedVolumeViewer) -> None:
    img = _render_at(viewer, "yellow", 0.0)
    ax, _ = _marker_side(img, 600)
    _, sy = _marker_side(img, 900)
    assert sy < 0.4
    assert ax < 0.4  # Slicer's sagittal screen-right axis is posterior (0, -1, 0)


def test_file_in_lps_renders_like_the_ras_volume(tmp_path: Path, viewer: EmbeddedVolumeViewer) -> None:
    """Writing through SimpleITK (LPS) and loading back gives the same views: RAS conversion happens once."""
    vol = asymmetric_volume()
    image = volume_to_sitk(vol)
    assert image.GetDirection() == pytest.approx((-1, 0, 0, 0, -1, 0, 0, 0, 1))
    path = tmp_path / "markers.nrrd"
    sitk.WriteImage(image, str(path))
    loaded = load_volume(path)
    assert np.allclose(loaded.ijk_to_ras, vol.ijk_to_ras)
    other = EmbeddedVolumeViewer()
    vid = other.add_volume(loaded)
    other.recover_standard_views(vid)
    other.set_window_level(vid, 1200.0, 600.0)
    for view in ("red", "yellow", "green"):
        a = _render_at(viewer, view, 1.0)
        b = _render_at(other, view, 1.0)
        assert np.array_equal(a, b), view


def test_flipped_storage_order_is_displayed_identically() -> None:
    """A volume stored with reversed I and J axes (negative direction) shows the same anatomy."""
    vol = asymmetric_volume()
    flipped = make_volume(
        dims=(41, 41, 41), direction=np.diag([-1.0, -1.0, 1.0]), origin=(20.0, 20.0, -20.0), name="markers"
    )
    flipped.data = np.ascontiguousarray(vol.data[:, ::-1, ::-1])
    flipped.__post_init__()
    views = []
    for v in (vol, flipped):
        viewer = EmbeddedVolumeViewer()
        vid = viewer.add_volume(v)
        viewer.recover_standard_views(vid)
        viewer.set_window_level(vid, 1200.0, 600.0)
        views.append([_render_at(viewer, n, 0.0) for n in ("red", "yellow", "green")])
    for a, b in zip(views[0], views[1], strict=True):
        assert np.abs(a.astype(int) - b.astype(int)).max() <= 1
