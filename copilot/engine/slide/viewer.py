"""The embedded slide viewer: a QuPath-like viewport over a whole-slide image.

The viewport is QuPath's: a centre in level-0 pixels, a downsample factor and a component size
in screen pixels. Screen pixel (sx, sy) (continuous, origin top-left) shows level-0 position
(cx + (sx - W/2)·d, cy + (sy - H/2)·d). Downsamples are clamped to QuPath's range
(1/64 … max(width, height)/100); the centre is kept on the image. Rendering reads only the tiles
of the best pyramid level that the viewport covers.
"""

from __future__ import annotations

import copy
import math
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from copilot.engine.geometry import Viewport, magnification_at, pyramid_level
from copilot.engine.peek import Peek, peek_slide
from copilot.engine.slide.overlays import draw_slide_overlays, overview_box
from copilot.engine.slide.source import SlideError, SlideSource, TileCache, filled
from copilot.errors import ViewerError

MIN_DOWNSAMPLE = 1.0 / 64.0  # QuPathViewer.getMinDownsample()
ZOOM_STEP = 1.01  # QuPathViewer.getDefaultZoomFactor(): one zoomIn() step
IMAGE_TYPES = ("BRIGHTFIELD_H_E", "BRIGHTFIELD_H_DAB", "BRIGHTFIELD_OTHER", "FLUORESCENCE", "OTHER", "UNSET")
OUTSIDE_RGB = (0, 0, 0)  # the viewer background beyond the image
PREFETCH_MARGIN = 0.5  # after each render, tiles up to half a viewport beyond each edge are decoded in idle time


class EmbeddedSlideViewer:
    """One slide at a time in a QuPath-like viewport; implements the slide-viewer protocol.

    Screenshots go to the model as JPEG (quality `render.JPEG_QUALITY`): a 1024 × 768 H&E view encodes
    in about 2 ms against 50–70 ms for PNG; `screenshot_format="png"` keeps them lossless.
    """

    kind = "pathology"

    def __init__(
        self, size: tuple[int, int] = (1024, 768), cache: TileCache | None = None, screenshot_format: str = "jpeg"
    ) -> None:
        if screenshot_format not in ("png", "jpeg"):
            raise ValueError("screenshot_format must be png or jpeg")
        self.size = size
        self.screenshot_format = screenshot_format
        self.cache = cache if cache is not None else TileCache()
        self.slide: SlideSource | None = None
        self.viewport = Viewport(0.0, 0.0, 1.0, *size)
        self.image_type = "UNSET"
        self.last_action = "none"
        self._prefetch: Future[int] | None = None

    def wait_idle(self, timeout: float | None = None) -> int:
        """Wait for the background prefetch of the last render; the number of tiles it decoded."""
        return self._prefetch.result(timeout) if self._prefetch is not None else 0

    # ----- transactional state -----
    def export_state(self) -> dict[str, Any]:
        return {
            "slide": self.slide,
            "viewport": copy.copy(self.viewport),
            "image_type": self.image_type,
            "last_action": self.last_action,
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        self.slide = state["slide"]
        self.viewport = state["viewport"]
        self.image_type = state["image_type"]
        self.last_action = state["last_action"]

    # ----- image -----
    def open(self, path: str | Path, image_type: str = "BRIGHTFIELD_H_E") -> None:
        """Open a slide and fit it in the viewer (QuPath's zoom-to-fit on open)."""
        try:
            self.slide = SlideSource(path, cache=self.cache)
        except SlideError as exc:
            raise ViewerError(exc.code, str(exc)) from exc
        self.image_type = image_type
        self.fit()

    def close(self) -> None:
        self.slide = None
        self.image_type = "UNSET"

    def has_image(self) -> bool:
        return self.slide is not None

    def require(self) -> SlideSource:
        if self.slide is None:
            raise ViewerError("no_image", "no image is open in the viewer; call load_case or load_image")
        return self.slide

    def set_image_type(self, image_type: str) -> None:
        self.require()
        if image_type not in IMAGE_TYPES:
            raise ViewerError("invalid_arguments", f"image type must be one of {IMAGE_TYPES}")
        self.image_type = image_type

    # ----- geometry -----
    def max_downsample(self) -> float:
        w, h = self.require().info.dimensions
        return max(w, h) / 100.0

    def full_magnification(self) -> float | None:
        return full_magnification(self.require().info)

    def magnification(self) -> float | None:
        full = self.full_magnification()
        return None if full is None else full / self.viewport.downsample

    def fit_downsample(self) -> float:
        w, h = self.require().info.dimensions
        return max(w / self.viewport.width, h / self.viewport.height)

    def fit(self) -> None:
        w, h = self.require().info.dimensions
        self.viewport.cx, self.viewport.cy = w / 2.0, h / 2.0
        self.viewport.downsample = self.fit_downsample()

    def set_downsample(self, downsample: float, anchor: tuple[float, float] | None = None) -> bool:
        """Set the downsample (clamped to QuPath's range), keeping a level-0 anchor fixed on screen.

        Returns True when the request was clamped.
        """
        if not (math.isfinite(downsample) and downsample > 0):
            raise ViewerError("invalid_arguments", "the zoom must give a positive, finite downsample")
        lo, hi = MIN_DOWNSAMPLE, self.max_downsample()
        new = min(max(downsample, lo), hi)
        vp = self.viewport
        if anchor is not None:
            ax, ay = anchor
            ratio = new / vp.downsample
            vp.cx, vp.cy = ax + (vp.cx - ax) * ratio, ay + (vp.cy - ay) * ratio
        vp.downsample = new
        self._clamp_centre()
        return not math.isclose(new, downsample, rel_tol=1e-12)

    def set_centre(self, x: float, y: float) -> bool:
        """Centre the viewer on a level-0 point (kept on the image); True when clamped."""
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ViewerError("invalid_arguments", "the centre must be finite")
        self.require()
        self.viewport.cx, self.viewport.cy = x, y
        return self._clamp_centre()

    def _clamp_centre(self) -> bool:
        w, h = self.require().info.dimensions
        vp = self.viewport
        cx, cy = min(max(vp.cx, 0.0), float(w)), min(max(vp.cy, 0.0), float(h))
        clamped = (cx, cy) != (vp.cx, vp.cy)
        vp.cx, vp.cy = cx, cy
        return clamped

    def point_to_level0(self, x1000: float, y1000: float) -> tuple[float, float]:
        self.require()
        return self.viewport.norm1000_to_level0(x1000, y1000)

    def overview_box(self) -> tuple[int, int, int, int] | None:
        """Screen rectangle of the overview thumbnail drawn over the view."""
        return overview_box(self.require(), self.viewport)

    # ----- rendering -----
    def render(self, overlays: bool = True) -> Image.Image:
        """RGB screenshot of the viewport; with the overview, scale bar and magnification overlays."""
        slide = self.require()
        image = render_viewport(slide, self.viewport)
        self._prefetch = prefetch_around(slide, self.viewport)
        if overlays:
            draw_slide_overlays(image, slide, self.viewport, self.magnification())
        return image

    def peek(self, request: Peek) -> dict[str, Image.Image]:
        """The viewer's image for a `Peek` (the session puts the viewport back afterwards)."""
        return peek_slide(self, request)

    def geometry(self, view: str = "viewer") -> Viewport:
        """A copy of the viewport, for a host's own conversions."""
        return copy.copy(self.viewport)

    def scene_data(self) -> dict[str, Any]:
        """Slides have no 3D scene."""
        return {}

    def state(self) -> dict[str, Any]:
        if self.slide is None:
            return {"image_open": False, "image_type": self.image_type, "last_action": self.last_action}
        level = slide_level(self.slide, self.viewport.downsample)
        return viewport_state(
            self.slide.info, self.viewport, self.magnification(), self.image_type, level, self.last_action
        )


def full_magnification(info: Any) -> float | None:
    """Magnification at downsample 1, from the pixel size (10 µm / mpp: 0.25 µm/px ≈ 40×); the objective
    power only when the slide has no pixel size."""
    return magnification_at(1.0, info.mpp[0] if info.mpp else None, info.objective_power)


def viewport_state(
    info: Any, vp: Viewport, mag: float | None, image_type: str, level: int, last_action: str
) -> dict[str, Any]:
    """The JSON state of a slide viewer (embedded or QuPath)."""
    x0, y0, x1, y1 = vp.bounds()
    return {
        "image_open": True,
        "image": info.name,
        "dimensions": list(info.dimensions),
        "levels": len(info.level_dimensions),
        "level_downsamples": [round(d, 6) for d in info.level_downsamples],
        "mpp": list(info.mpp) if info.mpp else None,
        "image_type": image_type,
        "center": [round(vp.cx, 3), round(vp.cy, 3)],
        "downsample": round(vp.downsample, 6),
        "magnification": None if mag is None else round(mag, 4),
        "viewer_size": [vp.width, vp.height],
        "visible_region": [round(v, 3) for v in (x0, y0, x1, y1)],
        "pyramid_level": level,
        "last_action": last_action,
    }


def slide_level(slide: SlideSource, downsample: float) -> int:
    return pyramid_level(slide.info.level_downsamples, downsample)


@dataclass(frozen=True)
class _Grid:
    """The tiles of one (level, scale) that a level-0 rectangle covers, and that rectangle in its pixels."""

    level: int
    scale: int
    tile: int
    tx0: int
    ty0: int
    tx1: int
    ty1: int
    left: float
    top: float
    right: float
    bottom: float

    def tiles(self) -> list[tuple[int, int]]:
        return [(tx, ty) for ty in range(self.ty0, self.ty1 + 1) for tx in range(self.tx0, self.tx1 + 1)]


def _grid(slide: SlideSource, level: int, scale: int, bounds: tuple[float, float, float, float]) -> _Grid:
    ds = slide.info.level_downsamples[level] * scale
    lw, lh = slide.scaled_dimensions(level, scale)
    t = slide.tile // scale
    left, top, right, bottom = (v / ds for v in bounds)
    tx0, ty0 = max(0, math.floor(left / t)), max(0, math.floor(top / t))
    tx1, ty1 = min(math.ceil(lw / t) - 1, math.floor(right / t)), min(math.ceil(lh / t) - 1, math.floor(bottom / t))
    return _Grid(level, scale, t, tx0, ty0, tx1, ty1, left, top, right, bottom)


def render_viewport(slide: SlideSource, vp: Viewport) -> Image.Image:
    """Read only the tiles the viewport covers at the (level, decode scale) serving it; resample to the screen.

    When that level's pixels are the screen's (downsample equal to the level's, the usual case at
    1, 2, 4, 8, 16 …), tiles are copied at the nearest whole-pixel offset without resampling.
    """
    level, scale = slide.serving_level(vp.downsample)
    ds = slide.info.level_downsamples[level] * scale
    exact = math.isclose(vp.downsample, ds, rel_tol=1e-9)
    x0, y0, x1, y1 = vp.bounds()
    reach = 0.0 if exact else max(vp.downsample, ds)  # the resampling filter reads this far past the view
    g = _grid(slide, level, scale, (x0 - reach, y0 - reach, x1 + reach, y1 + reach))
    if g.tx1 < g.tx0 or g.ty1 < g.ty0:
        return Image.new("RGB", (vp.width, vp.height), OUTSIDE_RGB)
    tiles = slide.read_tiles(level, g.tiles(), scale)
    if exact:
        return Image.fromarray(_paste_1to1(tiles, g, vp.width, vp.height))
    t = g.tile
    mosaic = filled(((g.ty1 - g.ty0 + 1) * t, (g.tx1 - g.tx0 + 1) * t), OUTSIDE_RGB)
    for (tx, ty), tile in tiles.items():
        oy, ox = (ty - g.ty0) * t, (tx - g.tx0) * t
        mosaic[oy : oy + tile.shape[0], ox : ox + tile.shape[1]] = tile
    box = (x0 / ds - g.tx0 * t, y0 / ds - g.ty0 * t, x1 / ds - g.tx0 * t, y1 / ds - g.ty0 * t)
    return resample_view(mosaic, box, vp.width, vp.height)


def resample_view(mosaic: np.ndarray, box: tuple[float, float, float, float], width: int, height: int) -> Image.Image:
    """The `box` of a level mosaic (its pixels, may reach past the mosaic) resampled to the screen.

    Pillow's bilinear resize widens its filter by the shrink factor, so a view that shrinks is low-pass
    filtered like OpenSlide users' read_region + resize, inside the image or past its edge. Past the edge
    the mosaic is padded with the background by the filter's reach and only the screen pixels whose
    footprint meets the image are resampled; the rest stay background (no affine map without a filter).
    """
    mh, mw = mosaic.shape[:2]
    if box[0] >= 0 and box[1] >= 0 and box[2] <= mw and box[3] <= mh:
        return Image.fromarray(mosaic).resize((width, height), Image.Resampling.BILINEAR, box=box)
    sx_, sy_ = (box[2] - box[0]) / width, (box[3] - box[1]) / height  # level pixels per screen pixel
    pad = math.ceil(max(sx_, sy_, 1.0)) + 2  # bilinear reach: one screen pixel on each side, and a margin
    sx0, sx1 = max(0, math.ceil((-pad - box[0]) / sx_)), min(width, math.floor((mw + pad - box[0]) / sx_))
    sy0, sy1 = max(0, math.ceil((-pad - box[1]) / sy_)), min(height, math.floor((mh + pad - box[1]) / sy_))
    out = Image.new("RGB", (width, height), OUTSIDE_RGB)
    if sx1 <= sx0 or sy1 <= sy0:
        return out
    padded = filled((mh + 2 * pad, mw + 2 * pad), OUTSIDE_RGB)
    padded[pad : pad + mh, pad : pad + mw] = mosaic
    sub = (box[0] + sx0 * sx_ + pad, box[1] + sy0 * sy_ + pad, box[0] + sx1 * sx_ + pad, box[1] + sy1 * sy_ + pad)
    out.paste(Image.fromarray(padded).resize((sx1 - sx0, sy1 - sy0), Image.Resampling.BILINEAR, box=sub), (sx0, sy0))
    return out


def _paste_1to1(tiles: dict[tuple[int, int], np.ndarray], g: _Grid, width: int, height: int) -> np.ndarray:
    """Screen array from tiles whose pixels are screen pixels: each tile copied once at a whole-pixel offset."""
    out = filled((height, width), OUTSIDE_RGB)
    ox, oy = math.floor(g.left + 0.5), math.floor(g.top + 0.5)  # level pixel shown at screen (0, 0)
    t = g.tile
    for (tx, ty), tile in tiles.items():
        x0, y0 = tx * t - ox, ty * t - oy  # tile origin on screen
        sx0, sy0 = max(0, -x0), max(0, -y0)
        dx0, dy0 = max(0, x0), max(0, y0)
        w = min(tile.shape[1] - sx0, width - dx0)
        h = min(tile.shape[0] - sy0, height - dy0)
        if w > 0 and h > 0:
            out[dy0 : dy0 + h, dx0 : dx0 + w] = tile[sy0 : sy0 + h, sx0 : sx0 + w]
    return out


def prefetch_around(slide: SlideSource, vp: Viewport, margin: float = PREFETCH_MARGIN) -> Future[int]:
    """Warm the cache with the tiles around the viewport (`margin` of its size on each side) in idle time."""
    level, scale = slide.serving_level(vp.downsample)
    x0, y0, x1, y1 = vp.bounds()
    mx, my = (x1 - x0) * margin, (y1 - y0) * margin
    g = _grid(slide, level, scale, (x0 - mx, y0 - my, x1 + mx, y1 + my))
    inner = _grid(slide, level, scale, (x0, y0, x1, y1))
    cx, cy = (inner.tx0 + inner.tx1) / 2.0, (inner.ty0 + inner.ty1) / 2.0
    ring = [k for k in g.tiles() if not (inner.tx0 <= k[0] <= inner.tx1 and inner.ty0 <= k[1] <= inner.ty1)]
    ring.sort(key=lambda k: (k[0] - cx) ** 2 + (k[1] - cy) ** 2)  # nearest first
    return slide.prefetch(level, ring, scale)
