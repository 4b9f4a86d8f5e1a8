"""Synthetic whole-slide images: H&E-like texture written as tiled, pyramidal, JPEG-compressed TIFF.

The files are "generic tiled TIFF" as OpenSlide reads them: one tiled page per pyramid level
(level 0 first), microns per pixel in the TIFF resolution tags (ResolutionUnit = centimetre), which
OpenSlide reports as `openslide.mpp-x/y`.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import numpy as np
import tifffile
from PIL import Image
from scipy import ndimage

GLASS = np.array([242, 238, 243], dtype=np.float32)
EOSIN = np.array([226, 150, 192], dtype=np.float32)
HAEMATOXYLIN = np.array([78, 45, 128], dtype=np.float32)


def smooth_field(shape: tuple[int, int], rng: np.random.Generator, scale: float) -> np.ndarray:
    """Smooth random field in [0, 1] with features about `scale` pixels across."""
    small = (max(2, round(shape[0] / scale)), max(2, round(shape[1] / scale)))
    field = ndimage.gaussian_filter(rng.standard_normal(small), 1.0)
    field = ndimage.zoom(field, (shape[0] / small[0], shape[1] / small[1]), order=1)[: shape[0], : shape[1]]
    lo, hi = field.min(), field.max()
    return (field - lo) / max(hi - lo, 1e-9)


def nuclei_map(shape: tuple[int, int], rng: np.random.Generator, density: float, radius: float) -> np.ndarray:
    """Map in [0, 1] of round nuclei: `density` nuclei per 10,000 px², `radius` px."""
    count = int(shape[0] * shape[1] * density / 1e4)
    seeds = np.zeros(shape, dtype=np.float32)
    ys = rng.integers(0, shape[0], count)
    xs = rng.integers(0, shape[1], count)
    seeds[ys, xs] = 1.0
    blobs = ndimage.gaussian_filter(seeds, radius / 1.5) * (2 * np.pi * (radius / 1.5) ** 2)
    return np.clip(blobs * 1.6, 0, 1)


def he_image(tissue: np.ndarray, nuclei: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """RGB H&E-like image from a tissue probability map and a nuclei map."""
    return he_stain(tissue, nuclei, rng.standard_normal((*tissue.shape, 1)).astype(np.float32))


def he_stain(tissue: np.ndarray, nuclei: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """RGB H&E-like pixels from tissue and nuclei maps in [0, 1] and standard-normal stain noise (h, w, 1)."""
    t = tissue[..., None].astype(np.float32)
    n = (nuclei * tissue)[..., None].astype(np.float32)
    stroma = EOSIN + noise * 6.0
    rgb = GLASS * (1 - t) + stroma * t
    rgb = rgb * (1 - n) + HAEMATOXYLIN * n
    return np.clip(rgb, 0, 255).astype(np.uint8)


TileSource = Callable[[int, int, int, int], np.ndarray]  # (y0, x0, h, w) -> (h, w, 3) uint8 of level 0
Progress = Callable[[float], None]


def write_pyramid(
    path: Path,
    image: np.ndarray,
    mpp: float,
    downsamples: tuple[int, ...] = (1, 4, 16),
    tile: int = 256,
    quality: int = 90,
    bigtiff: bool = True,
) -> Path:
    """Write an RGB image as a tiled JPEG pyramid with `mpp` µm/px at level 0 (classic TIFF if not `bigtiff`)."""
    return write_pyramid_tiles(
        path, image.shape[:2], lambda y, x, h, w: image[y : y + h, x : x + w], mpp, downsamples, tile, quality, bigtiff
    )


def write_pyramid_tiles(
    path: Path,
    shape: tuple[int, int],
    source: TileSource,
    mpp: float,
    downsamples: tuple[int, ...] = (1, 4, 16),
    tile: int = 256,
    quality: int = 90,
    bigtiff: bool = True,
    progress: Progress | None = None,
) -> Path:
    """Write a (height, width) RGB slide whose level-0 tiles `source` paints, one tile at a time, as a tiled
    JPEG pyramid: memory stays a few tile rows whatever the slide size.

    Level 0 is asked for tile by tile, in row order; each tile is box-reduced (PIL's `reduce`) into the lower
    levels as it passes, so a lower level's tile row is complete when level 0's is, and goes to a temporary
    file beside `path` until its page is written. Boxes never straddle tiles (`tile` is a multiple of every
    downsample), so the pixels equal those of reducing the whole image at once. `progress` gets the written
    fraction of all levels' pixels."""
    height, width = shape
    if downsamples[0] != 1 or any(tile % d for d in downsamples) or tile % 16:
        raise ValueError(f"downsamples {downsamples} must start at 1 and divide the tile size {tile} (× 16)")
    path.parent.mkdir(parents=True, exist_ok=True)
    lower = [(d, -(-height // d), -(-width // d)) for d in downsamples[1:]]
    total = sum(-(-h // tile) * -(-w // tile) for h, w in [(height, width)] + [(h, w) for _, h, w in lower])
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress is not None and (done[0] % 16 == 0 or done[0] == total):
            progress(done[0] / total)

    with tifffile.TiffWriter(path, bigtiff=bigtiff) as tw, contextlib.ExitStack() as stack:
        spill = [stack.enter_context(tempfile.TemporaryFile(dir=path.parent)) for _ in lower]

        def level0() -> Iterator[np.ndarray]:
            for y in range(0, height, tile):
                h = min(tile, height - y)
                rows = [np.zeros((-(-h // d), lw, 3), np.uint8) for d, _, lw in lower]
                for x in range(0, width, tile):
                    w = min(tile, width - x)
                    block = np.ascontiguousarray(source(y, x, h, w), dtype=np.uint8)
                    if block.shape != (h, w, 3):
                        raise ValueError(f"tile at ({x}, {y}) is {block.shape}, expected {(h, w, 3)}")
                    pil = Image.fromarray(block)
                    for (d, _, _), row in zip(lower, rows, strict=True):
                        small = np.asarray(pil.reduce(d))
                        row[:, x // d : x // d + small.shape[1]] = small
                    if x + tile >= width:  # the row is complete: spill it before the writer stops asking
                        for f, row in zip(spill, rows, strict=True):
                            f.write(row.tobytes())
                    tick()
                    yield block

        def spilled(f: IO[bytes], lh: int, lw: int) -> Iterator[np.ndarray]:
            f.seek(0)
            for y in range(0, lh, tile):
                h = min(tile, lh - y)
                band = np.frombuffer(f.read(h * lw * 3), np.uint8).reshape(h, lw, 3)
                for x in range(0, lw, tile):
                    tick()
                    yield band[:, x : x + tile]

        pages = [((height, width), 1, level0())]
        pages += [((lh, lw), d, spilled(f, lh, lw)) for (d, lh, lw), f in zip(lower, spill, strict=True)]
        for n, (level_shape, d, tiles) in enumerate(pages):
            res = 1e4 / (mpp * d)  # pixels per centimetre
            tw.write(
                tiles,
                shape=(*level_shape, 3),
                dtype=np.uint8,
                tile=(tile, tile),
                compression="jpeg",
                compressionargs={"level": quality},
                photometric="rgb",
                resolution=(res, res),
                resolutionunit="CENTIMETER",
                subfiletype=0 if n == 0 else 1,
                metadata=None,
            )
    return path
