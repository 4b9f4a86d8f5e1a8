"""What QuPath draws over a slide view: the overview thumbnail with the viewport box (top right),
a scale bar (bottom left) and the magnification (top left)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from PIL import Image, ImageDraw

from copilot.engine.geometry import Viewport
from copilot.engine.volume.render import overlay_font

if TYPE_CHECKING:
    from copilot.engine.slide.source import SlideSource

OVERVIEW_MAX = 180  # px, longest side of the overview thumbnail
MARGIN = 8


def overview_box(slide: SlideSource, vp: Viewport) -> tuple[int, int, int, int]:
    """Screen rectangle (x0, y0, x1, y1) of the overview thumbnail."""
    tw, th = slide.thumbnail.size
    scale = OVERVIEW_MAX / max(tw, th)
    w, h = max(1, round(tw * scale)), max(1, round(th * scale))
    return (vp.width - MARGIN - w, MARGIN, vp.width - MARGIN, MARGIN + h)


def _nice_length(target: float) -> float:
    """1, 2 or 5 × 10^k closest below `target`."""
    if target <= 0:
        return 1.0
    k = math.floor(math.log10(target))
    for m in (5, 2, 1):
        if m * 10**k <= target:
            return float(m * 10**k)
    return float(10**k)


def draw_slide_overlays(image: Image.Image, slide: SlideSource, vp: Viewport, magnification: float | None) -> None:
    draw = ImageDraw.Draw(image)
    font = overlay_font(14)
    # overview thumbnail with the visible region
    x0, y0, x1, y1 = overview_box(slide, vp)
    image.paste(slide.thumbnail.resize((x1 - x0, y1 - y0), Image.Resampling.BILINEAR), (x0, y0))
    draw.rectangle((x0 - 1, y0 - 1, x1, y1), outline=(40, 40, 40))
    w, h = slide.info.dimensions
    sx, sy = (x1 - x0) / w, (y1 - y0) / h
    bx0, by0, bx1, by1 = vp.bounds()
    rect = (x0 + max(0.0, bx0) * sx, y0 + max(0.0, by0) * sy, x0 + min(w, bx1) * sx, y0 + min(h, by1) * sy)
    draw.rectangle(tuple(round(v) for v in rect), outline=(255, 0, 0), width=2)
    # scale bar: a round length in µm (or px without calibration) about 150 screen px long
    mpp = slide.info.mpp[0] if slide.info.mpp else None
    per_px = vp.downsample * (mpp if mpp else 1.0)
    length = _nice_length(150 * per_px)
    bar = max(1, round(length / per_px))
    unit = "um" if mpp else "px"
    label = f"{length / 1000:g} mm" if mpp and length >= 1000 else f"{length:g} {unit}"
    bx, by = MARGIN + 4, vp.height - MARGIN - 10
    draw.rectangle((bx - 4, by - 22, bx + bar + 4, by + 6), fill=(255, 255, 255))
    draw.rectangle((bx, by, bx + bar, by + 3), fill=(0, 0, 0))
    draw.text((bx, by - 19), label, fill=(0, 0, 0), font=font)
    # magnification and downsample, as the viewer state says
    mag = f"{magnification:.1f}x" if magnification is not None else "magnification unknown"
    text = f"{slide.info.name}  {mag}  (downsample {vp.downsample:.3g})"
    tw = draw.textlength(text, font=font)
    draw.rectangle((MARGIN - 4, MARGIN - 3, MARGIN + tw + 4, MARGIN + 18), fill=(255, 255, 255))
    draw.text((MARGIN, MARGIN), text, fill=(0, 0, 0), font=font)
