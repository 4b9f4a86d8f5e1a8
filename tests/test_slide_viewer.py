"""The embedded slide viewer: viewport geometry, pyramid level choice, markers found where the conversion
says, QuPath's zoom limits, and pathology handler contracts in-process and over HTTP."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from PIL import Image
from scipy import ndimage

from copilot.cases.slides import write_pyramid
from copilot.engine.geometry import Viewport
from copilot.engine.slide.overlays import overview_box
from copilot.engine.slide.source import SlideSource, TileCache
from copilot.engine.slide.viewer import MIN_DOWNSAMPLE, EmbeddedSlideViewer, render_viewport
from copilot.runtime import open_session
from copilot.server.client import LocalClient
from copilot.tools import PATHOLOGY
from tests.conftest import RunningServer, canonical_state

W, H = 6000, 4000
MARKER = (4321, 1234)  # level-0 centre of the green marker
MARKER_HALF = 40


@pytest.fixture(scope="module")
def slide_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    case = tmp_path_factory.mktemp("slide_case")
    img = np.full((H, W, 3), (236, 226, 236), dtype=np.uint8)
    img[500:3500, 600:2600] = (220, 140, 185)  # a block of "tissue"
    mx, my = MARKER
    img[my - MARKER_HALF : my + MARKER_HALF, mx - MARKER_HALF : mx + MARKER_HALF] = (0, 200, 0)
    write_pyramid(case / "images" / "slide.tif", img, mpp=0.25, downsamples=(1, 4, 16))
    (case / "hidden").mkdir()
    (case / "hidden" / "annotations.geojson").write_text("{}")
    meta = {"case_id": "slide_1", "module": "breast_wsi", "inputs": {"slide": "images/slide.tif"}}
    (case / "case.json").write_text(json.dumps(meta))
    return case


def test_slide_metadata_and_fit(slide_case: Path) -> None:
    viewer = EmbeddedSlideViewer()
    viewer.open(slide_case / "images" / "slide.tif")
    info = viewer.slide.info
    assert info.dimensions == (W, H) and info.level_downsamples == (1.0, 4.0, 16.0)
    assert info.mpp == (0.25, 0.25) and info.backend == "openslide"
    assert viewer.full_magnification() == pytest.approx(40.0)  # 0.25 µm/px ≈ 40×
    st_ = viewer.state()
    assert st_["downsample"] == pytest.approx(max(W / 1024, H / 768))
    assert st_["center"] == [W / 2, H / 2]


def _marker_centroid(png: bytes, viewer: EmbeddedSlideViewer) -> tuple[float, float] | None:
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    green = (rgb[..., 1] > 150) & (rgb[..., 0] < 90) & (rgb[..., 2] < 90)
    x0, y0, x1, y1 = overview_box(viewer.slide, viewer.viewport)
    green[max(0, y0 - 2) : y1 + 3, max(0, x0 - 2) : x1 + 3] = False  # the overview also shows the marker
    labels, n = ndimage.label(green)
    if n == 0:
        return None
    sizes = ndimage.sum(green, labels, range(1, n + 1))
    ys, xs = np.nonzero(labels == 1 + int(np.argmax(sizes)))
    return float(xs.mean() + 0.5), float(ys.mean() + 0.5)


@settings(
    max_examples=25, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(downsample=0.5, dx=0.25, dy=-0.3125)  # magnified, the marker near the overview: it must not be hidden
@given(
    downsample=st.floats(0.5, 12.0),
    dx=st.floats(-0.45, 0.45),
    dy=st.floats(-0.45, 0.45),
)
def test_marker_appears_where_the_conversion_says(slide_case: Path, downsample, dx, dy) -> None:
    session = open_session(slide_case)
    viewer = session._viewer
    vp = viewer.viewport
    # place the marker anywhere in the view (off-centre, near the edges), at any zoom level
    cx = MARKER[0] - dx * vp.width * downsample
    cy = MARKER[1] - dy * vp.height * downsample
    assume(0 <= cx <= W and 0 <= cy <= H)
    viewer.set_downsample(downsample)
    viewer.set_centre(cx, cy)
    shot = session.call("capture_viewer", {"label": "probe"})
    assert shot.ok
    found = _marker_centroid(shot.images[0].data, viewer)
    sx, sy = vp.level0_to_screen(*MARKER)
    assume(MARKER_HALF / downsample + 2 < sx < vp.width - MARKER_HALF / downsample - 2)
    assume(MARKER_HALF / downsample + 30 < sy < vp.height - MARKER_HALF / downsample - 30)
    ox0, _oy0, ox1, oy1 = overview_box(viewer.slide, vp)
    reach = MARKER_HALF / downsample + 4  # the marker's half-width on screen: none of it under the overview
    assume(not (ox0 - reach < sx < ox1 + reach and sy < oy1 + reach))
    assert found is not None
    x1000, y1000 = found[0] / vp.width * 1000, found[1] / vp.height * 1000
    out = session.call("viewer_point_to_wsi_coordinate", {"x": x1000, "y": y1000})
    assert out.ok
    assert abs(out.result["x"] - MARKER[0]) <= max(1.0, downsample)
    assert abs(out.result["y"] - MARKER[1]) <= max(1.0, downsample)


def test_reads_only_the_tiles_it_needs(slide_case: Path) -> None:
    cache = TileCache()
    viewer = EmbeddedSlideViewer(cache=cache)
    viewer.open(slide_case / "images" / "slide.tif")
    viewer.set_downsample(1.0)
    viewer.set_centre(3000, 2000)
    render_viewport(viewer.slide, viewer.viewport)  # the render itself, without the idle-time prefetch
    # 1024×768 at level 0 with the file's 256-px tiles: at most 5 × 4 tiles
    assert cache.misses <= 20 and len(cache._items) <= 20
    before = cache.misses
    render_viewport(viewer.slide, viewer.viewport)
    assert cache.misses == before  # warm: all hits
    viewer.set_downsample(10.0)
    assert viewer.state()["pyramid_level"] == 1  # best level for downsample 10 is the 4× level


def test_tile_cache_is_bounded() -> None:
    cache = TileCache(max_bytes=10_000)
    for i in range(50):
        cache.put(("s", 0, i, 0), np.zeros((30, 30, 3), np.uint8))
    assert cache.nbytes <= 10_000 and cache.get(("s", 0, 49, 0)) is not None and cache.get(("s", 0, 0, 0)) is None


def test_zoom_limits_and_border_clamping_follow_qupath(slide_case: Path) -> None:
    session = open_session(slide_case)
    c = LocalClient(session)
    out = c.call("zoom", {"direction": "in", "amount": 10000, "unit": "factor"})
    assert out.ok and out.result["clamped"] and out.result["downsample"] == pytest.approx(MIN_DOWNSAMPLE)
    out = c.call("zoom", {"direction": "out", "amount": 10000, "unit": "factor"})
    assert out.ok and out.result["clamped"] and out.result["downsample"] == pytest.approx(max(W, H) / 100)
    out = c.call("pan", {"direction": "left", "amount": 50, "unit": "fraction"})
    assert out.ok and out.result["clamped"] and out.result["center"][0] == 0.0
    out = c.call("zoom", {"unit": "magnification", "amount": 10})
    assert out.result["magnification"] == pytest.approx(10.0) and out.result["downsample"] == pytest.approx(4.0)
    steps = c.call("zoom", {"direction": "in", "amount": 10, "unit": "steps"})
    assert steps.result["downsample"] == pytest.approx(4.0 / 1.01**10)
    assert "magnification: " in steps.result["direct_state_summary"]
    microns = c.call("pan", {"direction": "down", "amount": 100, "unit": "microns"})
    assert microns.result["center"][1] == pytest.approx(H / 2 + 400)


BAD = [
    ("zoom", {"direction": "sideways"}, "invalid_arguments"),
    ("zoom", {"unit": "factor"}, "invalid_arguments"),
    ("zoom", {"direction": "in", "amount": 0.5}, "invalid_arguments"),
    ("zoom", {"direction": "in", "amount": 2.5, "unit": "steps"}, "invalid_arguments"),
    ("zoom", {"direction": "out", "amount": 80, "unit": "magnification"}, "invalid_arguments"),
    ("zoom", {"direction": "in", "x": 500}, "invalid_arguments"),
    ("zoom", {"direction": "in", "x": 1000, "y": 3}, "invalid_arguments"),
    ("pan", {}, "invalid_arguments"),
    ("pan", {"direction": "left", "x": 3, "y": 4}, "invalid_arguments"),
    ("pan", {"direction": "left", "amount": float("nan")}, "invalid_arguments"),
    ("pan", {"direction": "left", "amount": -3}, "invalid_arguments"),
    ("viewer_point_to_wsi_coordinate", {"x": 1200, "y": 3}, "invalid_arguments"),
    ("viewer_point_to_wsi_coordinate", {"x": 3}, "invalid_arguments"),
    ("load_case", {"path": "../../etc/passwd"}, "path_outside_case"),
    ("load_case", {"path": "hidden/annotations.geojson"}, "path_outside_case"),
    ("load_image", {"path": "case.json"}, "load_failed"),
    ("set_image_type", {"image_type": "XRAY"}, "invalid_arguments"),
    ("capture_viewer", {"label": "x" * 500}, "invalid_arguments"),
    ("record_view_evidence", {"x": 5}, "invalid_arguments"),
    ("sleep", {"seconds": 60}, "invalid_arguments"),
    ("focus_qupath", {"now": True}, "invalid_arguments"),
    ("get_qupath_state", {"verbose": 1}, "invalid_arguments"),
    ("close", {"force": True}, "invalid_arguments"),
    ("center_on_wsi_coordinate", {"x": -5, "y": 3}, "invalid_arguments"),
]


def test_every_pathology_handler_has_bad_cases() -> None:
    assert {s.name for s in PATHOLOGY.specs("A")} <= {n for n, _, _ in BAD}  # Track B's export: its own test


@pytest.mark.parametrize("transport", ["local", "http"])
def test_bad_pathology_calls_change_nothing(slide_case: Path, tmp_path: Path, transport: str) -> None:
    session = open_session(slide_case, trace_dir=tmp_path / "trace")
    srv = RunningServer(session) if transport == "http" else None
    client = srv.client if srv else LocalClient(session)
    try:
        assert client.call("zoom", {"direction": "in", "amount": 2, "x": 300, "y": 700}).ok
        for name, args, code in BAD:
            before = canonical_state(client)
            reply = client.call(name, args)
            assert not reply.ok and reply.error_code == code, (name, args, reply.body)
            assert reply.status == 422
            assert canonical_state(client) == before, (name, args)
        if srv:
            assert client.request("GET", "/slicer/volumes").status == 404  # radiology-only subset
        assert client.call("close", {}).ok
        assert client.call("zoom", {"direction": "in"}).error_code == "no_image"
        assert client.call("load_case", {}).ok
    finally:
        if srv:
            srv.stop()


def test_slide_session_traces_and_replays(slide_case: Path, tmp_path: Path) -> None:
    from copilot.replay import replay

    session = open_session(slide_case, trace_dir=tmp_path / "t")
    session.call("zoom", {"direction": "in", "amount": 3, "x": 200, "y": 300})
    session.call("pan", {"direction": "up", "amount": 120, "unit": "screen_pixels"})
    session.call("viewer_point_to_wsi_coordinate", {"x": 500, "y": 500})
    session.call("record_view_evidence", {"label": "roi", "x": 510, "y": 480})
    session.close()
    report = replay(tmp_path / "t")
    assert report.ok, report.summary()


def test_tiffslide_fallback_reads_what_openslide_cannot(tmp_path: Path) -> None:
    """A single-level, stripped TIFF: OpenSlide's generic handler needs tiles; tiffslide reads it."""
    import tifffile

    img = np.zeros((300, 400, 3), np.uint8)
    img[:, :200] = (10, 200, 30)
    tifffile.imwrite(tmp_path / "flat.tif", img, photometric="rgb")
    src = SlideSource(tmp_path / "flat.tif")
    assert src.info.backend == "tiffslide" and src.info.dimensions == (400, 300)
    assert tuple(src.read_tile(0, 0, 0)[10, 10]) == (10, 200, 30)


def test_memory_stays_flat_panning_a_100k_by_80k_slide() -> None:
    """Pan 120 viewports over a generated 100,000 × 80,000 px slide with a 48 MB tile cache (separate process)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "slide.py"
    out = subprocess.run(
        [sys.executable, str(script), "--memory", "--steps", "120", "--cache-mb", "48", "--textured", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    profile = json.loads(out.stdout.strip().splitlines()[-1])
    assert profile["cache_bytes_mb"] <= 48
    assert profile["growth_after_warmup_mb"] < 48, profile


@pytest.mark.parametrize("compression", ["zlib", "jpeg"])
@pytest.mark.parametrize(("downsample", "centre"), [(3.3, (300.0, 200.0)), (5.7, (1000.0, 700.0)), (2.6, (600, 450))])
def test_shrinking_views_are_low_pass_filtered_past_the_edge(
    tmp_path: Path, compression: str, downsample: float, centre: tuple[float, float]
) -> None:
    """Alternate black and white pixel columns on a single-level slide: a view that shrinks shows them as an even
    grey (low-pass filtered), not as stripes (aliasing), inside the image and past its edge (black there)."""
    import tifffile

    img = np.zeros((768, 1024, 3), np.uint8)
    img[:, ::2] = 255
    path = tmp_path / f"lines_{compression}.tif"
    tifffile.imwrite(path, img, tile=(256, 256), compression=compression, photometric="rgb", metadata=None)
    src = SlideSource(path, cache=TileCache())
    vp = Viewport(centre[0], centre[1], downsample, 400, 300)
    out = np.asarray(render_viewport(src, vp)).astype(float)
    xs, ys = np.meshgrid(np.arange(400) + 0.5, np.arange(300) + 0.5)
    lx, ly = vp.screen_to_level0(xs, ys)
    margin = 2 * downsample
    inside = (lx > margin) & (ly > margin) & (lx < 1024 - margin) & (ly < 768 - margin)
    outside = (lx < -margin) | (ly < -margin) | (lx > 1024 + margin) | (ly > 768 + margin)
    assert inside.sum() > 1000
    grey = out[inside].mean(axis=1)
    assert abs(grey.mean() - 127.5) < 12 and grey.std() < 12, (grey.mean(), grey.std())
    assert outside.sum() == 0 or out[outside].max() == 0
