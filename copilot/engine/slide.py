"""Whole-slide images: OpenSlide first, tiffslide where OpenSlide cannot read a file, and a tile cache.

`read_region` follows OpenSlide's convention: the location is in level-0 pixels, the size in
pixels of the requested level. Tiles are read in level coordinates and kept in a byte-bounded LRU
cache, so panning a gigapixel slide never holds more than the budget in memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

DEFAULT_TILE = 512
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
BACKGROUND_RGB = (255, 255, 255)  # what a slide shows where it has no data (glass)


class SlideError(ValueError):
    """A file could not be opened as a whole-slide image."""


@dataclass(frozen=True)
class SlideInfo:
    """What the viewer needs to know about a slide."""

    path: str
    name: str
    dimensions: tuple[int, int]
    level_dimensions: tuple[tuple[int, int], ...]
    level_downsamples: tuple[float, ...]
    mpp: tuple[float, float] | None
    objective_power: float | None
    backend: str


class SlideSource:
    """A slide opened with OpenSlide (or tiffslide), with cached tile reads."""

    def __init__(self, path: str | Path, cache: TileCache | None = None, tile: int = DEFAULT_TILE) -> None:
        p = Path(path)
        if not p.is_file():
            raise SlideError(f"no such slide file: {p.name}")
        self._slide, backend = _open(p)
        self.tile = tile
        self.cache = cache if cache is not None else TileCache()
        self._lock = threading.Lock()
        props = self._slide.properties
        self.info = SlideInfo(
            path=str(p),
            name=p.stem,
            dimensions=tuple(self._slide.dimensions),  # type: ignore[arg-type]
            level_dimensions=tuple(tuple(d) for d in self._slide.level_dimensions),  # type: ignore[misc]
            level_downsamples=tuple(float(d) for d in self._slide.level_downsamples),
            mpp=_mpp(props),
            objective_power=_float(props.get("openslide.objective-power")),
            backend=backend,
        )
        self.thumbnail = self._make_thumbnail(256)

    def close(self) -> None:
        self._slide.close()

    def best_level(self, downsample: float) -> int:
        """The level OpenSlide would read for a downsample (the largest level downsample not above it)."""
        return int(self._slide.get_best_level_for_downsample(downsample))

    def read_tile(self, level: int, tx: int, ty: int) -> np.ndarray:
        """RGB tile (level coordinates `tx*tile`, `ty*tile`), clipped at the level's edge; cached."""
        key = (self.info.path, level, tx, ty)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        lw, lh = self.info.level_dimensions[level]
        w, h = min(self.tile, lw - tx * self.tile), min(self.tile, lh - ty * self.tile)
        ds = self.info.level_downsamples[level]
        loc = (round(tx * self.tile * ds), round(ty * self.tile * ds))
        with self._lock:  # OpenSlide handles are thread-safe, tiffslide's are not
            region = self._slide.read_region(loc, level, (w, h))
        tile = _to_rgb(region)
        self.cache.put(key, tile)
        return tile

    def _make_thumbnail(self, side: int) -> Image.Image:
        w, h = self.info.dimensions
        scale = side / max(w, h)
        thumb = self._slide.get_thumbnail((max(1, round(w * scale)), max(1, round(h * scale))))
        return Image.fromarray(_to_rgb(thumb))


def _open(path: Path) -> tuple[Any, str]:
    import openslide

    try:
        return openslide.OpenSlide(str(path)), "openslide"
    except (openslide.OpenSlideUnsupportedFormatError, openslide.OpenSlideError) as first:
        try:
            import tiffslide

            return tiffslide.TiffSlide(str(path)), "tiffslide"
        except Exception as exc:  # tiffslide raises several types for unreadable files
            raise SlideError(f"cannot open {path.name}: {first}; tiffslide: {exc}") from exc


def _float(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if f > 0 else None


def _mpp(props: Any) -> tuple[float, float] | None:
    x = _float(props.get("openslide.mpp-x", props.get("tiffslide.mpp-x")))
    y = _float(props.get("openslide.mpp-y", props.get("tiffslide.mpp-y")))
    if x is None:
        return None
    return (x, y if y is not None else x)


def _to_rgb(image: Image.Image) -> np.ndarray:
    """RGBA (premultiplied transparent where there is no data) composited on the glass background."""
    if image.mode == "RGB":
        return np.asarray(image)
    rgba = np.asarray(image.convert("RGBA"), dtype=np.uint16)
    alpha = rgba[..., 3:4]
    bg = np.array(BACKGROUND_RGB, dtype=np.uint16)
    rgb = (rgba[..., :3] * alpha + bg * (255 - alpha) + 127) // 255
    return rgb.astype(np.uint8)


class TileCache:
    """Thread-safe LRU of decoded tiles, bounded in bytes."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def get(self, key: tuple[Any, ...]) -> np.ndarray | None:
        with self._lock:
            tile = self._items.get(key)
            if tile is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return tile

    def put(self, key: tuple[Any, ...], tile: np.ndarray) -> None:
        with self._lock:
            if key in self._items:
                return
            self._items[key] = tile
            self._bytes += tile.nbytes
            while self._bytes > self.max_bytes and len(self._items) > 1:
                _, old = self._items.popitem(last=False)
                self._bytes -= old.nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
