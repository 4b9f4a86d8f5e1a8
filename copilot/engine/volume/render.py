"""Composing a slice view: background and foreground layers, fusion, corner overlays, PNG encoding.

Grey views stay 8-bit single-channel images (half the PNG encoding cost of RGB); colour maps and
fusion produce RGB. The renderers are named so that a trace records which one drew its images, and replay
uses whichever a trace names:

- `slab-resize-2` (`RENDERER` where numba is installed) samples by `sampling.slice_uint8` with oblique planes
  by its compiled trilinear kernel, and fuses two layers with one look-up in a 256×256 RGB table (built once
  per colour maps, opacity and mode by the very Pillow operations it replaces, so fusion is bit-identical to
  them);
- `slab-resize-1` (`RENDERER` without numba) is the same with oblique planes resampled by SimpleITK;
- `pillow-affine-1` (`LEGACY_RENDERER`) is the Pillow-affine path of traces that name no renderer.

All give the same pixels within one grey level; the first two differ on oblique planes only.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFont

from copilot.engine.geometry import SliceView
from copilot.engine.png import PNG_ENCODER, png_encoder
from copilot.engine.volume import trilinear
from copilot.engine.volume.display import LUTS, DisplaySettings
from copilot.engine.volume.image import Volume
from copilot.engine.volume.reslice import reslice_uint8
from copilot.engine.volume.sampling import slice_uint8

PNG_COMPRESS_LEVEL = 1  # cines (APNG, Pillow): level 1 is ~4× faster than Pillow's default 6
JPEG_QUALITY = 90  # slide screenshots for the model: visually lossless for H&E at this size, ~15× faster than PNG
KERNEL_RENDERER = "slab-resize-2"  # oblique planes by the compiled trilinear kernel
ITK_RENDERER = "slab-resize-1"  # oblique planes by SimpleITK's Resample
LEGACY_RENDERER = "pillow-affine-1"  # what a trace header without `renderer` was drawn with
RENDERERS = (KERNEL_RENDERER, ITK_RENDERER, LEGACY_RENDERER)
RENDERER = KERNEL_RENDERER if trilinear.available() else ITK_RENDERER  # what new traces record


def check_renderer(name: str | None) -> str:
    """The renderer of a name (None: the legacy one of traces that name none); a ValueError for others and for
    the kernel one where numba is not installed."""
    key = LEGACY_RENDERER if name is None else name
    if key not in RENDERERS:
        raise ValueError(f"unknown slice renderer {key!r}; this version has {', '.join(RENDERERS)}")
    if key == KERNEL_RENDERER and not trilinear.available():
        raise ValueError(f"slice renderer {key!r} samples oblique planes with numba, which is not installed")
    return key


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
    renderer: str = RENDERER,
) -> Image.Image:
    """The view's image: 8-bit grey ('L') for a grey layer alone, RGB once a colour map or fusion is shown."""
    if renderer == LEGACY_RENDERER:
        return _compose_legacy(view, size, background, foreground, opacity, mode)
    check_renderer(renderer)
    m = view.image_to_ras_matrix(size)
    w, h = size
    bg = _grey(background, m, size, renderer) if background is not None else np.zeros((h, w), dtype=np.uint8)
    if foreground is not None and opacity > 0.0:
        fg = _grey(foreground, m, size, renderer)
        bg_map = background.display.colormap if background is not None else "grey"
        table = _fusion_table(bg_map, foreground.display.colormap, float(opacity), mode)
        index = bg.astype(np.uint16) << 8
        index |= fg
        rgbx = table.take(index)  # one look-up per pixel: colour maps and blend together
        return Image.frombuffer("RGBX", (w, h), rgbx, "raw", "RGBX", 0, 1).convert("RGB")
    image = Image.fromarray(bg, mode="L")
    if background is None or background.display.colormap == "grey":
        return image
    image.putpalette(_palette(background.display.colormap))
    return image.convert("RGB")


def _grey(layer: Layer, image_to_ras: np.ndarray, size: tuple[int, int], renderer: str) -> np.ndarray:
    d = layer.display
    oblique = "kernel" if renderer == KERNEL_RENDERER else "itk"
    return slice_uint8(layer.volume, image_to_ras, size, d.window, d.level, oblique)


@lru_cache(maxsize=32)
def _fusion_table(bg_map: str, fg_map: str, opacity: float, mode: str) -> np.ndarray:
    """RGBX (as uint32) of every (background grey, foreground grey) pair, index bg·256 + fg, made by the legacy
    composing operations themselves on a 256×256 image of all pairs."""
    pairs = np.arange(65536, dtype=np.uint32)
    bg = Image.fromarray((pairs >> 8).astype(np.uint8).reshape(256, 256), mode="L")
    fg = Image.fromarray((pairs & 255).astype(np.uint8).reshape(256, 256), mode="L")
    rgb = _blend(_coloured(bg, bg_map), _coloured(fg, fg_map), opacity, mode)
    rgbx = np.asarray(rgb.convert("RGBX")).reshape(-1, 4)
    return np.ascontiguousarray(rgbx).view(np.uint32).ravel()


def _coloured(grey: Image.Image, colormap: str) -> Image.Image:
    """A grey layer as shown: itself, or through its colour table as RGB."""
    if colormap == "grey":
        return grey
    grey = grey.copy()
    grey.putpalette(_palette(colormap))
    return grey.convert("RGB")


def _blend(bg_layer: Image.Image, fg_layer: Image.Image, opacity: float, mode: str) -> Image.Image:
    """Fusion of two shown layers (Pillow's C blend; 'add' adds the weighted foreground, saturating)."""
    bg, fg = bg_layer.convert("RGB"), fg_layer.convert("RGB")
    if mode == "add":
        return ImageChops.add(bg, Image.blend(Image.new("RGB", bg.size), fg, opacity))
    return Image.blend(bg, fg, opacity)


def _compose_legacy(
    view: SliceView,
    size: tuple[int, int],
    background: Layer | None,
    foreground: Layer | None,
    opacity: float,
    mode: str,
) -> Image.Image:
    """The renderer older traces were drawn with: Pillow's affine transform per layer, Pillow's blend."""
    m = view.image_to_ras_matrix(size)
    w, h = size
    image = _layer_image(background, m, size) if background is not None else Image.new("L", (w, h))
    if foreground is not None and opacity > 0.0:
        image = _blend(image, _layer_image(foreground, m, size), opacity, mode)
    return image


def _layer_image(layer: Layer, image_to_ras: np.ndarray, size: tuple[int, int]) -> Image.Image:
    grey = Image.fromarray(
        reslice_uint8(layer.volume, image_to_ras, size, layer.display.window, layer.display.level), mode="L"
    )
    return _coloured(grey, layer.display.colormap)


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
    corner annotations. The glyph masks of a line are rendered once and kept (most lines repeat from one render
    to the next); the pixels are those of `ImageDraw.text`."""
    w, h = image.size
    px = max(9, min(18, round(min(w, h) / 28)))
    font = overlay_font(px)
    draw = ImageDraw.Draw(image)
    ink, shadow = (255, 0) if image.mode == "L" else ((255, 255, 255), (0, 0, 0))
    inks = (draw.draw.draw_ink(shadow), draw.draw.draw_ink(ink))  # as `ImageDraw.text` packs them
    pad, line_h = 3, px + 2
    for corner, lines in corners.items():
        for n, text in enumerate(lines):
            tw = _text_length(px, text)
            x = pad if corner[1] == "l" else w - pad - tw
            y = pad + n * line_h if corner[0] == "t" else h - pad - (len(lines) - n) * line_h
            for (tx, ty), fill, colour in zip(((x + 1, y + 1), (x, y)), (shadow, ink), inks, strict=True):
                if not isinstance(font, ImageFont.FreeTypeFont):  # Pillow without FreeType: its bitmap font
                    draw.text((tx, ty), text, fill=fill, font=font)
                    continue
                mask, (dx, dy) = _text_mask(px, text, math.modf(tx)[0], math.modf(ty)[0])
                draw.draw.draw_bitmap((int(tx) + dx, int(ty) + dy), mask, colour)


@lru_cache(maxsize=1024)
def _text_length(px: int, text: str) -> float:
    return overlay_font(px).getlength(text, "L")


@lru_cache(maxsize=1024)
def _text_mask(px: int, text: str, fx: float, fy: float) -> tuple[Any, tuple[int, int]]:
    """The 8-bit glyph mask of a line (and its offset) at a sub-pixel start, as `ImageDraw.text` renders it (an
    8-bit mask does not depend on the ink: shadow and text share it)."""
    font = overlay_font(px)
    assert isinstance(font, ImageFont.FreeTypeFont)
    return font.getmask2(text, "L", None, None, None, 0, "la", 0, (fx, fy), stroke_filled=True)


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
