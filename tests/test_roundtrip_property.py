"""Property tests of the coordinate round trips, on oblique and anisotropic volumes.

`jump(ras)` then rendering must put that RAS point at the pixel that `image_coords_to_ras`
maps back to it (within half a voxel), whatever the view, zoom, pan and output size.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scipy import ndimage

from copilot.engine.volume.viewer import EmbeddedVolumeViewer
from copilot.session import Session
from copilot.tools import RADIOLOGY
from tests.conftest import make_volume, rotation

VIEWS = ("red", "yellow", "green")
angles = st.floats(-0.6, 0.6)
spacings = st.tuples(st.floats(0.6, 3.0), st.floats(0.6, 3.0), st.floats(0.6, 3.0))


def _session_with(volume) -> Session:
    viewer = EmbeddedVolumeViewer()
    session = Session(viewer, RADIOLOGY)
    vid = viewer.add_volume(volume)
    viewer.recover_standard_views(vid)
    viewer.set_window_level(vid, 2000.0, 1000.0)
    return session


def _blob_centroid(image: np.ndarray) -> tuple[float, float]:
    """Intensity-weighted centroid (x, y), in image coordinates, of the blob that is not overlay text.

    The blob is rendered mid-grey (at most 128); overlay glyphs are white (255), so components that
    reach above 200 are text and are skipped.
    """
    grey = image.astype(float)
    labels, n = ndimage.label(grey > 20)
    best, best_sum = 0, 0.0
    for lab in range(1, n + 1):
        values = grey[labels == lab]
        if values.max() <= 200 and values.sum() > best_sum:
            best, best_sum = lab, float(values.sum())
    ys, xs = np.nonzero(labels == best)
    w = grey[ys, xs]
    return float((w * (xs + 0.5)).sum() / w.sum()), float((w * (ys + 0.5)).sum() / w.sum())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ax=angles, ay=angles, az=angles, spacing=spacings,
    voxel=st.tuples(st.integers(6, 13), st.integers(6, 13), st.integers(6, 13)),
    view=st.sampled_from(VIEWS), size=st.sampled_from([160, 256, 400]),
    zoom=st.floats(1.0, 1.5), anchor=st.tuples(st.integers(300, 700), st.integers(300, 700)),
)  # fmt: skip
@example(
    ax=0.0,
    ay=0.375,
    az=3.5e-299,
    spacing=(1.0, 1.0, 1.0),
    voxel=(6, 6, 6),
    view="red",
    size=160,
    zoom=1.0,
    anchor=(300, 300),
)  # denormal direction cosines once broke ITK's inverse
def test_jump_render_and_convert_back(ax, ay, az, spacing, voxel, view, size, zoom, anchor) -> None:
    vol = make_volume(dims=(20, 20, 20), spacing=spacing, direction=rotation(ax, ay, az), origin=(5.0, -7.0, 3.0))
    i, j, k = voxel
    vol.data[k - 1 : k + 2, j - 1 : j + 2, i - 1 : i + 2] = 1000.0  # a 3-voxel cube centred on the voxel
    vol.__post_init__()
    target = vol.ijk_to_ras_point(np.array(voxel, dtype=float))
    session = _session_with(vol)
    viewer = session._viewer
    # a field of view 4× the cube, then zoom about an arbitrary screen point (the cube stays in view)
    v = viewer.view(view)
    v.fov = (12.0 * max(spacing),) * 2
    assert session.call("jump", {"ras": target.tolist(), "view": view, "size": size}).ok
    out = session.call("zoom", {"view": view, "factor": zoom, "center_1000": list(anchor), "size": size})
    assert out.ok, out.error
    image = np.asarray(viewer.render(view, (size, size)))
    x, y = _blob_centroid(image)
    reply = session.call("image_coords_to_ras", {"view": view, "point_1000": [x / size * 1000, y / size * 1000]})
    assert reply.ok, reply.error
    back = np.array(reply.result["ras"])
    half_voxel = 0.5 * min(spacing)
    assert np.linalg.norm(back - target) <= half_voxel
    assert reply.result["ijk"] == [i, j, k]


@settings(max_examples=60, deadline=None)
@given(
    ax=angles, ay=angles, az=angles, spacing=spacings, view=st.sampled_from(VIEWS),
    w=st.integers(64, 1024), h=st.integers(64, 1024), zoom=st.floats(0.5, 8.0),
    px=st.floats(0, 999), py=st.floats(0, 999),
)  # fmt: skip
def test_point_conversion_round_trip_is_exact(ax, ay, az, spacing, view, w, h, zoom, px, py) -> None:
    vol = make_volume(dims=(30, 24, 18), spacing=spacing, direction=rotation(ax, ay, az))
    viewer = EmbeddedVolumeViewer()
    viewer.recover_standard_views(viewer.add_volume(vol))
    viewer.zoom(view, zoom, vol.center_ras() + 1.5)
    v = viewer.view(view)
    ras = v.norm1000_to_ras((px, py), (w, h))
    assert abs(float(v.axis @ ras) - v.offset) < 1e-9  # the point lies on the displayed plane
    assert np.allclose(v.ras_to_norm1000(ras, (w, h)), [px, py], atol=1e-9)
    again = v.norm1000_to_ras(tuple(v.ras_to_norm1000(ras, (w, h))), (w, h))
    assert np.linalg.norm(again - ras) <= 1e-6


@settings(max_examples=40, deadline=None)
@given(ax=angles, ay=angles, az=angles, spacing=spacings, view=st.sampled_from(VIEWS), frac=st.floats(0, 1))
def test_set_offset_then_state_gives_same_offset(ax, ay, az, spacing, view, frac) -> None:
    vol = make_volume(dims=(16, 20, 12), spacing=spacing, direction=rotation(ax, ay, az), origin=(-9.0, -11.0, -4.0))
    session = _session_with(vol)
    rng = session.call("get_slice_offset_range", {"view": view}).result
    offset = rng["min"] + frac * (rng["max"] - rng["min"])
    assert session.call("set_slice_offset", {"view": view, "offset": offset, "size": 64}).ok
    state = session.call("get_viewer_state", {}).result
    assert abs(state["views"][view]["offset"] - offset) <= 1e-6


def test_offset_zero_is_a_valid_offset() -> None:
    vol = make_volume(dims=(21, 21, 21), origin=(-10.0, -10.0, -10.0))
    vol.data[10, 10, 10] = 1000.0
    vol.__post_init__()
    session = _session_with(vol)
    for view in VIEWS:
        assert session.call("set_slice_offset", {"view": view, "offset": 5.0, "size": 64}).ok
        out = session.call("set_slice_offset", {"view": view, "offset": 0, "size": 64})
        assert out.ok, out.error
        assert out.result["offset"] == 0.0
        assert session.snapshot()["views"][view]["offset"] == 0.0
