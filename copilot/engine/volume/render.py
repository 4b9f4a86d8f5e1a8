"""Composing a slice view: background and foreground layers, fusion, corner overlays, PNG encoding.

Grey views stay 8-bit single-channel images (half the PNG encoding cost of RGB); colour maps and
fusion produce RGB. Colour mapping and blending run in Pillow's C code.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFont

from copilot.engine.geometry import SliceView
from copilot.engine.png import PNG_ENCODER, png_encoder
from copilot.engine.volume.display import LUTS, DisplaySettings
from copilot.engine.volume.image import Volume
from copilot.engine.volume.reslice import reslice_uint8

PNG_COMPRESS_LEVEL = 1  # cines (APNG, Pillow): level 1 is ~4× faster than Pillow's default 6
JPEG_QUALITY = 90  # slide screenshots for the model: visually lossless for H&E at this size, ~15× faster than PNG


@dataclass(frozen=True)
class Layer:
    """A volume shown in a view, with its display settings."""

    volume: Volume
    display: DisplaySettings


def compose(
    view: SliceView,
    size: tuple[int, int],
    background: Layer | None,
    foreground: Layer | None = None,
    opacity: float = 0.0,
    mode: str = "blend",
) -> Image.Image:
    """The view's image: 8-bit grey ('L') for a grey layer alone, RGB once a colour map or fusion is shown."""
    m = view.image_to_ras_matrix(size)
    w, h = size
    image = _layer_image(background, m, size) if background is not None else Image.new("L", (w, h))
    if foreground is not None and opacity > 0.0:
        bg = image.convert("RGB")
        fg = _layer_image(foreground, m, size).convert("RGB")
        if mode == "add":
            image = ImageChops.add(bg, Image.blend(Image.new("RGB", (w, h)), fg, opacity))
        else:
            image = Image.blend(bg, fg, opacity)
    return image


def _layer_image(layer: Layer, image_to_ras: np.ndarray, size: tuple[int, int]) -> Image.Image:
    grey = Image.fromarray(
        reslice_uint8(layer.volume, image_to_ras, size, layer.display.window, layer.display.level), mode="L"
    )
    if layer.display.colormap == "grey":
        return grey
    grey.putpalette(_palette(layer.display.colormap))
    return grey.convert("RGB")


@lru_cache(maxsize=8)
def _palette(colormap: str) -> bytes:
    return LUTS[colormap].astype(np.uint8).tobytes()


@lru_cache(maxsize=8)
def overlay_font(px: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=px)


def corner_text(
    view: SliceView, background: tuple[str, DisplaySettings] | None, foreground: str | None, opacity: float
) -> dict[str, list[str]]:
    """Corner annotations of a view: name, orientation and canonical offset; W/L; background/foreground names."""
    corners: dict[str, list[str]] = {
        "tl": [f"{view.name.capitalize()}  {view.orientation}", f"{view.axis_label}: {view.offset:.1f}mm"]
    }
    if background is not None:
        name, d = background
        corners["tr"] = [f"W: {d.window:.0f}  L: {d.level:.0f}"]
        corners["bl"] = [f"B: {name}"]
        if foreground:
            corners["bl"].append(f"F: {foreground} ({opacity:.0%})")
    return corners


def draw_corners(image: Image.Image, corners: dict[str, list[str]]) -> None:
    """Draw white text lines with a dark shadow in the image corners ('tl', 'tr', 'bl', 'br'), like Slicer's
    corner annotations."""
    w, h = image.size
    px = max(9, min(18, round(min(w, h) / 28)))
    font = overlay_font(px)
    draw = ImageDraw.Draw(image)
    ink, shadow = (255, 0) if image.mode == "L" else ((255, 255, 255), (0, 0, 0))
    pad, line_h = 3, px + 2
    for corner, lines in corners.items():
        for n, text in enumerate(lines):
            tw = draw.textlength(text, font=font)
            x = pad if corner[1] == "l" else w - pad - tw
            y = pad + n * line_h if corner[0] == "t" else h - pad - (len(lines) - n) * line_h
            draw.text((x + 1, y + 1), text, fill=shadow, font=font)
            draw.text((x, y), text, fill=ink, font=font)


def encode_png(image: Image.Image, encoder: str = PNG_ENCODER) -> bytes:
    """PNG bytes of an image by a named lossless encoder (`copilot.engine.png`; deterministic for given pixels)."""
    return png_encoder(encoder)(image)


def encode_jpeg(image: Image.Image, quality: int = JPEG_QUALITY) -> bytes:
    """JPEG bytes (slide screenshots for the model: libjpeg-turbo, 4:2:0 chroma; deterministic for given pixels).

    TurboJPEG's one-call encoder where present (about a third faster than Pillow's), else Pillow.
    """
    if image.mode == "RGB":
        from copilot.engine.slide.jpeg import encode_rgb

        data = encode_rgb(np.asarray(image), quality)
        if data is not None:
            return data
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def encode_apng(frames: list[Image.Image], frame_ms: int = 120) -> bytes:
    """Animated PNG of frames (a cine loop)."""
    buf = io.BytesIO()
    frames[0].save(
        buf,
        format="PNG",
        save_all=True,
        append_images=frames[1:],
        duration=frame_ms,
        loop=0,
        compress_level=PNG_COMPRESS_LEVEL,
    )
    return buf.getvalue()
