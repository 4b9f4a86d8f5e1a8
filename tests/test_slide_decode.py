"""Fast slide rendering: raw JPEG tiles decoded as OpenSlide decodes them, reduced-scale (DCT) decoding between
pyramid levels, whole-pixel pasting at a level's own scale, idle-time prefetch, OpenSlide for everything else,
and JPEG screenshots for the model whose exact bytes the trace keeps."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import openslide
import pytest
import tifffile
from PIL import Image

from copilot.engine.slide.source import SlideSource, TileCache
from copilot.engine.slide.viewer import EmbeddedSlideViewer, Viewport, render_viewport
from copilot.runtime import open_session
from tests.test_slide_viewer import MARKER, slide_case  # noqa: F401  (fixture)


def _slide(case: Path) -> Path:
    return case / "images" / "slide.tif"


def _openslide_rgb(path: Path, loc: tuple[int, int], level: int, size: tuple[int, int]) -> np.ndarray:
    with openslide.OpenSlide(str(path)) as s:
        return np.asarray(s.read_region(loc, level, size).convert("RGB")).astype(int)


def test_raw_jpeg_tiles_decode_as_openslide_does(slide_case: Path) -> None:  # noqa: F811
    src = SlideSource(_slide(slide_case), cache=TileCache())
    assert src.raw_levels == (0, 1, 2) and src.tile == 256
    for level, (tx, ty) in ((0, (16, 4)), (0, (23, 15)), (1, (5, 3)), (2, (1, 0))):
        mine = src.read_tile(level, tx, ty).astype(int)
        ds = int(src.info.level_downsamples[level])
        ref = _openslide_rgb(_slide(slide_case), (tx * 256 * ds, ty * 256 * ds), level, mine.shape[1::-1])
        assert np.abs(mine - ref).max() <= 1, (level, tx, ty)  # same libjpeg-turbo IDCT


def test_serving_level_uses_reduced_scale_between_levels(slide_case: Path) -> None:  # noqa: F811
    """Reduced-scale decoding where its pixels are the screen's or 8× more shrinking follows; in between, the full
    level is shrunk."""
    src = SlideSource(_slide(slide_case), cache=TileCache())  # levels at 1, 4, 16
    expected = {0.5: (0, 1), 1.0: (0, 1), 1.9: (0, 1), 2.0: (0, 2), 3.0: (0, 1), 4.0: (1, 1), 8.0: (1, 2)}
    expected |= {16.0: (2, 1), 40.0: (2, 1), 64.0: (2, 4), 128.0: (2, 8), 500.0: (2, 2), 1100.0: (2, 8)}
    assert {d: src.serving_level(d) for d in expected} == expected
    assert src.scaled_dimensions(0, 8) == (750, 500) and src.scaled_dimensions(2, 8) == (47, 32)


def test_reduced_scale_view_matches_openslide_downscaled(slide_case: Path) -> None:  # noqa: F811
    """Downsample 2 (no level there): level 0 decoded at 1/2 equals OpenSlide's level 0 averaged 2 × 2."""
    src = SlideSource(_slide(slide_case), cache=TileCache())
    vp = Viewport(4000.0, 1500.0, 2.0, 640, 480)
    mine = np.asarray(render_viewport(src, vp)).astype(int)
    x0, y0 = 4000 - 640, 1500 - 480
    ref = _openslide_rgb(_slide(slide_case), (x0, y0), 0, (1280, 960)).reshape(480, 2, 640, 2, 3).mean(axis=(1, 3))
    assert np.abs(mine - ref).mean() < 1.5 and np.abs(mine - ref).max() <= 40  # scaled IDCT ≈ 2 × 2 box
    green = (mine[..., 1] > 150) & (mine[..., 0] < 90) & (mine[..., 2] < 90)
    ys, xs = np.nonzero(green)
    assert (xs.mean() + 0.5, ys.mean() + 0.5) == pytest.approx(vp.level0_to_screen(*MARKER), abs=1.0)


def test_view_at_a_level_scale_is_pasted_at_whole_pixels(slide_case: Path) -> None:  # noqa: F811
    src = SlideSource(_slide(slide_case), cache=TileCache())
    vp = Viewport(3000.3, 2000.7, 1.0, 1024, 768)  # left edge 2488.3 → pixel 2488, top 1616.7 → 1617
    mine = np.asarray(render_viewport(src, vp)).astype(int)
    ref = _openslide_rgb(_slide(slide_case), (2488, 1617), 0, (1024, 768))
    assert np.abs(mine - ref).max() <= 1
    edge = np.asarray(render_viewport(src, Viewport(200.0, 100.0, 1.0, 1024, 768)))
    assert (edge[:284, :, :] == 0).all() and (edge[:, :312, :] == 0).all()  # beyond the image: viewer background


def test_prefetch_makes_a_quarter_viewport_pan_all_hits(slide_case: Path) -> None:  # noqa: F811
    cache = TileCache()
    viewer = EmbeddedSlideViewer(cache=cache)
    viewer.open(_slide(slide_case))
    for downsample in (1.0, 2.0):
        viewer.set_downsample(downsample)
        viewer.set_centre(3000, 2000)
        viewer.render()
        assert viewer.wait_idle(30) > 0  # neighbours decoded in the background
        misses = cache.misses
        viewer.set_centre(3000 + 256 * downsample, 2000 - 192 * downsample)
        render_viewport(viewer.slide, viewer.viewport)
        assert cache.misses == misses, downsample


def test_openslide_reads_what_is_not_a_raw_jpeg_pyramid(tmp_path: Path) -> None:
    """A deflate-compressed pyramid: no raw levels, reduced views resampled from OpenSlide's tiles."""
    img = np.zeros((1024, 1536, 3), np.uint8)
    img[:, 768:] = (30, 160, 90)
    path = tmp_path / "zlib.tif"
    with tifffile.TiffWriter(path) as tw:
        for n, d in enumerate((1, 4)):
            level = np.asarray(Image.fromarray(img).reduce(d))
            tw.write(level, tile=(256, 256), compression="zlib", photometric="rgb", subfiletype=0 if n == 0 else 1)
    src = SlideSource(path, cache=TileCache())
    assert src.info.backend == "openslide" and src.raw_levels == ()
    assert src.serving_level(2.0) == (0, 1)
    out = np.asarray(render_viewport(src, Viewport(768.0, 512.0, 2.0, 400, 300)))
    assert tuple(out[150, 100]) == (0, 0, 0) and tuple(out[150, 300]) == (30, 160, 90)


def test_model_screenshot_is_jpeg_and_the_trace_keeps_its_bytes(slide_case: Path, tmp_path: Path) -> None:  # noqa: F811
    session = open_session(slide_case, trace_dir=tmp_path / "t")
    out = session.call("zoom", {"direction": "in", "amount": 2})
    assert out.ok and out.images[0].mime == "image/jpeg" and out.images[0].data[:2] == b"\xff\xd8"
    session.close()
    events = [json.loads(line) for line in (tmp_path / "t" / "trace.jsonl").read_text().splitlines()]
    image = next(e for e in events if e.get("handler") == "zoom")["images"][0]
    stored = (tmp_path / "t" / image["artifact"]).read_bytes()
    assert image["artifact"].endswith(".jpg") and stored == out.images[0].data
    assert image["sha256"] == hashlib.sha256(stored).hexdigest()
