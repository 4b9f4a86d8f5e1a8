"""Synthetic whole-slide images: H&E-like texture written as tiled, pyramidal, JPEG-compressed TIFF.

The files are "generic tiled TIFF" as OpenSlide reads them: one tiled page per pyramid level
(level 0 first), microns per pixel in the TIFF resolution tags (ResolutionUnit = centimetre), which
OpenSlide reports as `openslide.mpp-x/y`.
"""

from __future__ import annotations

from pathlib import Path

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
    t = tissue[..., None].astype(np.float32)
    n = (nuclei * tissue)[..., None].astype(np.float32)
    stroma = EOSIN + (rng.standard_normal((*tissue.shape, 1)).astype(np.float32) * 6.0)
    rgb = GLASS * (1 - t) + stroma * t
    rgb = rgb * (1 - n) + HAEMATOXYLIN * n
    return np.clip(rgb, 0, 255).astype(np.uint8)


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
    path.parent.mkdir(parents=True, exist_ok=True)
    pil = Image.fromarray(image)
    with tifffile.TiffWriter(path, bigtiff=bigtiff) as tw:
        for n, d in enumerate(downsamples):
            level = image if d == 1 else np.asarray(pil.reduce(d))
            res = 1e4 / (mpp * d)  # pixels per centimetre
            tw.write(
                level,
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
