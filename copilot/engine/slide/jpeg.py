"""Raw JPEG tiles of tiled TIFF pyramids (generic TIFF, Aperio SVS), decoded by libjpeg-turbo at 1/1 to 1/8 scale.

OpenSlide stays the reader of record: a level is served from its raw tiles only when the file is a
tiled, 8-bit, 3-sample JPEG TIFF that OpenSlide reads as plain pages (vendor `generic-tiff` or
`aperio`) and one decoded tile matches OpenSlide's own `read_region` of it. Decoding a tile at a
reduced scale uses libjpeg-turbo's scaled inverse DCT (only the low-frequency coefficients are
transformed), which makes a virtual pyramid level at 2×, 4× and 8× the level's downsample for
about the cost of the entropy decoding alone.
"""

from __future__ import annotations

import functools
import io
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

SCALES = (1, 2, 4, 8)  # reduced-scale factors every libjpeg build supports
FAST_VENDORS = ("generic-tiff", "aperio")  # OpenSlide formats whose levels are plain tiled TIFF pages
MAX_PAGES = 2048  # pages looked at for pyramid levels (the structure check refuses longer chains first)
MATCH_TOLERANCE = 2.0  # mean absolute difference (grey levels) allowed against OpenSlide's decode of a tile

Decoder = Callable[[bytes, int], np.ndarray]


def _pillow_decode(data: bytes, scale: int) -> np.ndarray:
    """Pillow's libjpeg-turbo with `draft` (DCT scaling): the fallback when libturbojpeg is missing."""
    image = Image.open(io.BytesIO(data))
    if scale > 1:
        image.draft("RGB", (image.width // scale, image.height // scale))
    return np.asarray(image.convert("RGB"))


@functools.cache
def turbojpeg_handle() -> Any:
    """PyTurboJPEG's handle on libturbojpeg, or None where either is missing (loaded once)."""
    try:
        import turbojpeg

        return turbojpeg.TurboJPEG()
    except Exception:  # no PyTurboJPEG, or no libturbojpeg shared library
        return None


def make_decoder() -> tuple[Decoder, str]:
    """The fastest JPEG decoder here: TurboJPEG through PyTurboJPEG, else Pillow (both libjpeg-turbo)."""
    tj = turbojpeg_handle()
    if tj is None:
        return _pillow_decode, "pillow"
    import turbojpeg

    def decode(data: bytes, scale: int) -> np.ndarray:
        return tj.decode(data, pixel_format=turbojpeg.TJPF_RGB, scaling_factor=None if scale == 1 else (1, scale))

    return decode, "turbojpeg"


@functools.cache
def decoder() -> tuple[Decoder, str]:
    """The process-wide decoder and its name."""
    return make_decoder()


def encode_rgb(pixels: np.ndarray, quality: int) -> bytes | None:
    """Baseline JPEG (4:2:0) of an RGB array through TurboJPEG; None where it is unavailable."""
    tj = turbojpeg_handle()
    if tj is None:
        return None
    import turbojpeg

    return tj.encode(pixels, quality=quality, pixel_format=turbojpeg.TJPF_RGB, jpeg_subsample=turbojpeg.TJSAMP_420)


@dataclass(frozen=True)
class JpegLevel:
    """Where one pyramid level's tiles lie in the file."""

    width: int
    height: int
    tile: int
    across: int
    offsets: np.ndarray
    counts: np.ndarray
    tables: bytes | None


class JpegTiles:
    """Random access to the JPEG tiles of the levels of one TIFF, decoded at a chosen scale."""

    def __init__(self, path: Path, levels: dict[int, JpegLevel]) -> None:
        self.levels = levels
        self._fh = open(path, "rb", buffering=0)  # noqa: SIM115  (kept open for positional reads)
        self.decode, self.decoder_name = decoder()

    def close(self) -> None:
        self._fh.close()

    def tile(self, level: int, tx: int, ty: int, scale: int = 1) -> np.ndarray | None:
        """Tile (tx, ty) of a level decoded at 1/scale; None where the file stores no data (empty tile)."""
        lv = self.levels[level]
        idx = ty * lv.across + tx
        count = int(lv.counts[idx])
        if count == 0:
            return None
        data = os.pread(self._fh.fileno(), count, int(lv.offsets[idx]))
        if lv.tables is not None and len(lv.tables) > 4:  # abbreviated stream: splice the shared tables in
            data = lv.tables[:-2] + data[2:]
        return self.decode(data, scale)


def open_jpeg_tiles(path: Path, level_dimensions: tuple[tuple[int, int], ...], vendor: str | None) -> JpegTiles | None:
    """The raw-tile reader of a slide, for the levels that are tiled JPEG TIFF pages; None when there are none."""
    if vendor not in FAST_VENDORS or not hasattr(os, "pread"):
        return None
    try:
        import tifffile

        with tifffile.TiffFile(path) as tif:
            levels = _jpeg_levels(tif.pages, level_dimensions)
    except Exception:  # not a TIFF tifffile can parse: OpenSlide reads it
        return None
    return JpegTiles(path, levels) if levels else None


def _jpeg_levels(pages: Any, level_dimensions: tuple[tuple[int, int], ...]) -> dict[int, JpegLevel]:
    """Levels whose page is a square-tiled, 8-bit RGB/YCbCr JPEG with tiles a multiple of 8 px."""
    by_size: dict[tuple[int, int], Any] = {}
    for page in itertools.islice(pages, MAX_PAGES):  # a bounded walk, even of a chain that loops
        key = (int(page.imagewidth), int(page.imagelength))
        if key in level_dimensions and key not in by_size:
            by_size[key] = page
    out: dict[int, JpegLevel] = {}
    for n, size in enumerate(level_dimensions):
        page = by_size.get(size)
        if page is None or not _fast_page(page):
            continue
        out[n] = JpegLevel(
            width=size[0],
            height=size[1],
            tile=int(page.tilewidth),
            across=-(-size[0] // int(page.tilewidth)),
            offsets=np.asarray(page.dataoffsets, dtype=np.int64),
            counts=np.asarray(page.databytecounts, dtype=np.int64),
            tables=bytes(page.jpegtables) if page.jpegtables else None,
        )
    return out


def _fast_page(page: Any) -> bool:
    return (
        bool(page.is_tiled)
        and int(page.compression) == 7  # JPEG (TIFF Technical Note 2)
        and int(page.tilewidth) == int(page.tilelength)
        and int(page.tilewidth) % 8 == 0
        and int(page.tiledepth) == 1
        and int(page.samplesperpixel) == 3
        and int(page.bitspersample) == 8
        and int(page.planarconfig) == 1
        and int(page.photometric) in (2, 6)  # RGB or YCbCr
    )
