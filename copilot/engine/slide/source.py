"""Whole-slide images: OpenSlide first, tiffslide where OpenSlide cannot read a file, and a tile cache.

`read_region` follows OpenSlide's convention: the location is in level-0 pixels, the size in
pixels of the requested level. Tiles are read in level coordinates and kept in a byte-bounded LRU
cache, so panning a gigapixel slide never holds more than the budget in memory. Tiled JPEG TIFF
levels are decoded straight from their raw tiles, at 1/2, 1/4 or 1/8 scale when that scale is the
requested downsample (`slide_jpeg`); everything else is read through OpenSlide.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from copilot.engine.confine import check_sources
from copilot.engine.geometry import pyramid_level
from copilot.engine.slide.checks import SlideFileError, check_tiff_structure, has_subifds, is_tiff, slide_references
from copilot.engine.slide.identity import shown_name, tissue_levels
from copilot.engine.slide.jpeg import MATCH_TOLERANCE, SCALES, JpegTiles, open_jpeg_tiles
from copilot.engine.slide.probe import ProbeError, probe_slide
from copilot.errors import HandlerError

RESHRINK_MIN = 8.0  # a reduced-scale decode then shrunk by at least this much is as sharp as a full decode
DEFAULT_TILE = 512  # read unit when the file does not say its tile size
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
BACKGROUND_RGB = (255, 255, 255)  # what a slide shows where it has no data (glass)
_WORKERS = max(2, os.cpu_count() or 2)
_POOL = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="tiles")


def _lower_priority() -> None:
    """Run the prefetch thread at the lowest CPU priority, so it only uses time the foreground leaves idle."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)  # Linux: per-thread nice value


_IDLE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch", initializer=_lower_priority)


class SlideError(HandlerError, ValueError):
    """A file could not be opened or decoded as a whole-slide image (`load_failed`, `truncated_image`,
    `undecodable_pixels`): a refusal that names its reason, never a server error."""

    def __init__(self, message: str, code: str = "load_failed") -> None:
        HandlerError.__init__(self, code, message)


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
        vet_slide_file(p)
        if p.suffix.lower() in (".tif", ".tiff", ".svs"):
            check_tiff_complete(p)
        self._slide, backend = _open(p)
        self.cache = cache if cache is not None else TileCache()
        self._lock = threading.Lock()
        self._generation = 0  # bumped by each prefetch request; older requests stop
        try:
            self._describe(p, backend, tile)
        except SlideError:
            self._slide.close()
            raise
        except Exception as exc:  # the backends raise many types for damaged files
            self._slide.close()
            raise SlideError(f"cannot decode {p.name}: {type(exc).__name__}: {exc}", "undecodable_pixels") from exc

    def _describe(self, p: Path, backend: str, tile: int | None) -> None:
        """Levels, tile size, raw JPEG access and thumbnail (each may fail on a damaged file)."""
        props = self._slide.properties
        dims = tuple((int(w), int(h)) for w, h in self._slide.level_dimensions)
        self._tissue = tissue_levels(dims)  # a label or macro page read as a level is left out
        vendor = "tiffslide" if backend == "tiffslide" else props.get("openslide.vendor")
        self._jpeg: JpegTiles | None = open_jpeg_tiles(p, dims, "generic-tiff" if vendor == "tiffslide" else vendor)
        if self._jpeg is not None:
            for n in [n for n in self._jpeg.levels if n >= self._tissue]:
                del self._jpeg.levels[n]
        level0 = self._jpeg.levels.get(0) if self._jpeg is not None else None
        native = level0.tile if level0 is not None and 128 <= level0.tile <= 1024 else _native_tile(props)
        self.tile = tile or native
        self.info = SlideInfo(
            path=str(p),
            name=shown_name(p.stem, {str(k): str(v) for k, v in props.items() if v is not None}),
            dimensions=tuple(self._slide.dimensions),  # type: ignore[arg-type]
            level_dimensions=dims[: self._tissue],
            level_downsamples=tuple(float(d) for d in self._slide.level_downsamples)[: self._tissue],
            mpp=_mpp(props),
            objective_power=_float(props.get("openslide.objective-power")),
            backend=backend,
        )
        if min(self.info.dimensions) < 1:
            raise ValueError(f"empty image {self.info.dimensions}")
        self._verify_raw_levels()
        self.thumbnail = self.make_thumbnail(256)

    def close(self) -> None:
        if self._jpeg is not None:
            self._jpeg.close()
        self._slide.close()

    @property
    def raw_levels(self) -> tuple[int, ...]:
        """Levels decoded from their raw JPEG tiles (and so available at reduced scale)."""
        return tuple(sorted(self._jpeg.levels)) if self._jpeg is not None else ()

    def _verify_raw_levels(self) -> None:
        """Keep a raw level only if its tile grid is ours and a middle tile decodes as OpenSlide decodes it."""
        if self._jpeg is None:
            return
        for n, lv in list(self._jpeg.levels.items()):
            tx, ty = (lv.width // self.tile) // 2, (lv.height // self.tile) // 2
            ok = lv.tile == self.tile
            if ok:
                mine = self._read_raw(n, tx, ty, 1)
                ok = mine is not None and _close_to(mine, self._read_openslide(n, tx, ty))
            if not ok:
                del self._jpeg.levels[n]
        if not self._jpeg.levels:
            self._jpeg.close()
            self._jpeg = None

    def serving_level(self, downsample: float) -> tuple[int, int]:
        """(level, scale) to decode for a downsample: the level OpenSlide's get_best_level_for_downsample
        gives, or a raw JPEG level decoded at 1/scale (2, 4, 8) when that lands exactly on the downsample or
        leaves at least `RESHRINK_MIN` to shrink with the bilinear filter.

        A reduced-scale decode is a 2 × 2 … 8 × 8 box average and decimation: exact when its pixels are the
        screen's, but followed by a small further resize it blurs and aliases (fine lines break up), so there
        the level is decoded in full and shrunk with Pillow's widened bilinear filter, as OpenSlide users do.
        Ties go to the real level.
        """
        best = (pyramid_level(self.info.level_downsamples, downsample), 1)
        best_ds = self.info.level_downsamples[best[0]]
        for level in reversed(self.raw_levels):  # coarsest first: ties go to the level with less to decode
            for scale in SCALES[1:]:
                v = self.info.level_downsamples[level] * scale
                exact = math.isclose(v, downsample, rel_tol=1e-9)
                if best_ds * (1 + 1e-9) < v and (exact or downsample >= RESHRINK_MIN * v):
                    best, best_ds = (level, scale), v
        return best

    def scaled_dimensions(self, level: int, scale: int) -> tuple[int, int]:
        """Size of a level decoded at 1/scale (libjpeg rounds partial blocks up)."""
        w, h = self.info.level_dimensions[level]
        return (-(-w // scale), -(-h // scale))

    def _key(self, level: int, tx: int, ty: int, scale: int) -> tuple[Any, ...]:
        return (self.info.path, level, scale, tx, ty)

    def read_tile(self, level: int, tx: int, ty: int, scale: int = 1) -> np.ndarray:
        """RGB tile (level coordinates `tx*tile`, `ty*tile`, divided by `scale`), clipped at the level's edge."""
        hit = self.cache.get(self._key(level, tx, ty, scale))
        return hit if hit is not None else self._load_tile(level, tx, ty, scale)

    def _read_openslide(self, level: int, tx: int, ty: int) -> np.ndarray:
        lw, lh = self.info.level_dimensions[level]
        w, h = min(self.tile, lw - tx * self.tile), min(self.tile, lh - ty * self.tile)
        ds = self.info.level_downsamples[level]
        loc = (round(tx * self.tile * ds), round(ty * self.tile * ds))
        try:
            if self.info.backend == "openslide":  # OpenSlide handles are thread-safe
                region = self._slide.read_region(loc, level, (w, h))
            else:
                with self._lock:
                    region = self._slide.read_region(loc, level, (w, h))
            return _to_rgb(region)
        except Exception as exc:  # a damaged tile: refused by name, the view is left as it was
            raise SlideError(
                f"cannot decode a tile of {Path(self.info.path).name} (level {level}): {type(exc).__name__}: {exc}",
                "undecodable_pixels",
            ) from exc

    def _read_raw(self, level: int, tx: int, ty: int, scale: int) -> np.ndarray | None:
        """A raw JPEG tile decoded at 1/scale and clipped at the level's edge; None when undecodable."""
        assert self._jpeg is not None
        sw, sh = self.scaled_dimensions(level, scale)
        t = self.tile // scale
        w, h = min(t, sw - tx * t), min(t, sh - ty * t)
        try:
            decoded = self._jpeg.tile(level, tx, ty, scale)
        except Exception:  # a corrupt tile: let OpenSlide report it
            return None
        if decoded is None:  # no data stored: glass
            return filled((h, w), BACKGROUND_RGB)
        if decoded.shape[:2] != (t, t):
            return None
        return decoded if (h, w) == (t, t) else np.ascontiguousarray(decoded[:h, :w])

    def _load_tile(self, level: int, tx: int, ty: int, scale: int = 1) -> np.ndarray:
        """Decode one tile (raw JPEG when the level allows, else OpenSlide) and put it in the cache."""
        tile = None
        if self._jpeg is not None and level in self._jpeg.levels:
            tile = self._read_raw(level, tx, ty, scale)
        if tile is None:
            tile = self._read_openslide(level, tx, ty)
            if scale != 1:  # a level OpenSlide alone reads (or a corrupt raw tile): box-reduce its decode
                tile = np.asarray(Image.fromarray(tile).reduce(scale))
        self.cache.put(self._key(level, tx, ty, scale), tile)
        return tile

    def read_tiles(self, level: int, keys: list[tuple[int, int]], scale: int = 1) -> dict[tuple[int, int], np.ndarray]:
        """Several tiles; the ones not cached are decoded in parallel (the decoders release the GIL)."""
        out: dict[tuple[int, int], np.ndarray] = {}
        missing = []
        for tx, ty in keys:
            hit = self.cache.get(self._key(level, tx, ty, scale))
            if hit is None:
                missing.append((tx, ty))
            else:
                out[(tx, ty)] = hit
        chunks = [missing[i::_WORKERS] for i in range(_WORKERS)] if len(missing) > 2 else [missing]
        futures = [_POOL.submit(self._load_tiles, level, keys, scale) for keys in chunks[1:]]
        out.update(self._load_tiles(level, chunks[0], scale))  # this thread decodes its share too
        for future in futures:
            out.update(future.result())
        return out

    def _load_tiles(self, level: int, keys: list[tuple[int, int]], scale: int) -> dict[tuple[int, int], np.ndarray]:
        return {key: self._load_tile(level, *key, scale) for key in keys}

    def prefetch(self, level: int, keys: list[tuple[int, int]], scale: int = 1) -> Future[int]:
        """Decode tiles not yet cached on the background thread; a later request stops this one.

        Returns a future of the number of tiles decoded (for tests and benchmarks that wait for idle).
        """
        with self._lock:
            self._generation += 1
            generation = self._generation

        def job() -> int:
            done = 0
            for tx, ty in keys:
                if self._generation != generation:
                    break
                if self._key(level, tx, ty, scale) not in self.cache:
                    try:
                        self._load_tile(level, tx, ty, scale)
                    except Exception:  # the slide was closed meanwhile: nothing to warm
                        break
                    done += 1
            return done

        return _IDLE.submit(job)

    def make_thumbnail(self, side: int) -> Image.Image:
        """An RGB overview of the whole slide whose longer side is `side` pixels."""
        w, h = self.info.dimensions
        scale = side / max(w, h)
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        if self._tissue < len(self._slide.level_dimensions):  # never the label page: the coarsest tissue level
            level = self._tissue - 1
            region = self._slide.read_region((0, 0), level, self.info.level_dimensions[level])
            return Image.fromarray(_to_rgb(region)).resize(size, Image.Resampling.BILINEAR, reducing_gap=3.0)
        thumb = self._slide.get_thumbnail(size)
        return Image.fromarray(_to_rgb(thumb))


def vet_slide_file(path: Path) -> None:
    """What a slide file must pass before any reader parses it: confinement of the file and the data files it
    names, and (a TIFF) a sound directory structure with sizes a reader can allocate for."""
    check_sources(path, slide_references(path))
    try:
        if is_tiff(path):
            check_tiff_structure(path)
        else:  # formats without a structure check here: opened first in a child process with limits
            probe_slide(path)
    except (SlideFileError, ProbeError) as exc:
        raise SlideError(exc.message, exc.code) from None
    except OSError as exc:
        raise SlideError(f"cannot read {path.name}: {exc.strerror or exc}") from None


def check_tiff_complete(path: Path) -> None:
    """Refuse a TIFF whose image data lies (partly) beyond the end of the file, or that holds no image."""
    import tifffile

    size = path.stat().st_size
    try:
        with tifffile.TiffFile(str(path)) as tif:
            pages = list(tif.pages)
            if not pages:
                raise SlideError(f"{path.name} holds no image", "truncated_image")
            for page in pages:
                offsets = np.asarray(page.dataoffsets, dtype=np.int64)
                counts = np.asarray(page.databytecounts, dtype=np.int64)
                end = int((offsets + counts).max()) if offsets.size and offsets.size == counts.size else -1
                if not 0 < end <= size:
                    raise SlideError(
                        f"{path.name} is truncated: image data ends at byte {end} of a {size}-byte file",
                        "truncated_image",
                    )
    except SlideError:
        raise
    except Exception as exc:  # tifffile raises several types for damaged files
        raise SlideError(f"cannot read {path.name} as TIFF: {type(exc).__name__}: {exc}", "load_failed") from exc


def _open(path: Path) -> tuple[Any, str]:
    """OpenSlide, else tiffslide; tiffslide first for a TIFF whose pyramid levels are SubIFDs (OpenSlide would
    show level 0 alone)."""
    import openslide

    if is_tiff(path) and has_subifds(path):
        with contextlib.suppress(Exception):  # tiffslide raises several types; OpenSlide then has its say
            import tiffslide

            return tiffslide.TiffSlide(str(path)), "tiffslide"
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


def filled(shape: tuple[int, int], rgb: tuple[int, int, int]) -> np.ndarray:
    """An RGB array of one colour (a grey fills at memset speed; broadcasting a tuple is ~50× slower)."""
    if rgb[0] == rgb[1] == rgb[2]:
        return np.full((*shape, 3), rgb[0], dtype=np.uint8)
    return np.tile(np.array(rgb, dtype=np.uint8), (*shape, 1))


def _close_to(a: np.ndarray, b: np.ndarray) -> bool:
    """Two decodes of the same tile agree (same size, mean difference within JPEG decoder rounding)."""
    return a.shape == b.shape and float(np.abs(a.astype(np.int16) - b).mean()) <= MATCH_TOLERANCE


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

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        with self._lock:
            return key in self._items

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
