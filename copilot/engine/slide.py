"""Whole-slide images: OpenSlide first, tiffslide where OpenSlide cannot read a file, and a tile cache.

`read_region` follows OpenSlide's convention: the location is in level-0 pixels, the size in
pixels of the requested level. Tiles are read in level coordinates and kept in a byte-bounded LRU
cache, so panning a gigapixel slide never holds more than the budget in memory.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

DEFAULT_TILE = 512  # read unit when the file does not say its tile size
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
BACKGROUND_RGB = (255, 255, 255)  # what a slide shows where it has no data (glass)
_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="tiles")


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

    def __init__(self, path: str | Path, cache: TileCache | None = None, tile: int | None = None) -> None:
        p = Path(path)
        if not p.is_file():
            raise SlideError(f"no such slide file: {p.name}")
        self._slide, backend = _open(p)
        self.tile = tile or _native_tile(self._slide.properties)
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
        self.thumbnail = self.make_thumbnail(256)

    def close(self) -> None:
        self._slide.close()

    def read_tile(self, level: int, tx: int, ty: int) -> np.ndarray:
        """RGB tile (level coordinates `tx*tile`, `ty*tile`), clipped at the level's edge; cached."""
        hit = self.cache.get((self.info.path, level, tx, ty))
        return hit if hit is not None else self._load_tile(level, tx, ty)

    def _load_tile(self, level: int, tx: int, ty: int) -> np.ndarray:
        """Decode one tile and put it in the cache."""
        lw, lh = self.info.level_dimensions[level]
        w, h = min(self.tile, lw - tx * self.tile), min(self.tile, lh - ty * self.tile)
        ds = self.info.level_downsamples[level]
        loc = (round(tx * self.tile * ds), round(ty * self.tile * ds))
        if self.info.backend == "openslide":  # OpenSlide handles are thread-safe
            region = self._slide.read_region(loc, level, (w, h))
        else:
            with self._lock:
                region = self._slide.read_region(loc, level, (w, h))
        tile = _to_rgb(region)
        self.cache.put((self.info.path, level, tx, ty), tile)
        return tile

    def read_tiles(self, level: int, keys: list[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray]:
        """Several tiles; the ones not cached are decoded in parallel (OpenSlide releases the GIL)."""
        out: dict[tuple[int, int], np.ndarray] = {}
        missing = []
        for tx, ty in keys:
            hit = self.cache.get((self.info.path, level, tx, ty))
            if hit is None:
                missing.append((tx, ty))
            else:
                out[(tx, ty)] = hit
        if len(missing) > 1:
            for key, tile in zip(missing, _POOL.map(lambda k: self._load_tile(level, *k), missing), strict=True):
                out[key] = tile
        elif missing:
            out[missing[0]] = self._load_tile(level, *missing[0])
        return out

    def make_thumbnail(self, side: int) -> Image.Image:
        """An RGB overview of the whole slide whose longer side is `side` pixels."""
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


def _native_tile(props: Any) -> int:
    """The file's own tile width when it is a sensible read unit (one decode per read), else 512."""
    width = _float(props.get("openslide.level[0].tile-width"))
    return int(width) if width is not None and 256 <= width <= 1024 else DEFAULT_TILE


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
    """RGB array of a region; transparent (no-data) pixels composited over the glass background."""
    if image.mode == "RGB":
        return np.asarray(image)
    if image.mode != "RGBA":
        image = image.convert("RGBA")
    if image.getchannel("A").getextrema()[0] == 255:  # fully opaque: drop alpha
        return np.asarray(image.convert("RGB"))
    background = Image.new("RGBA", image.size, (*BACKGROUND_RGB, 255))
    return np.asarray(Image.alpha_composite(background, image).convert("RGB"))


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
