"""Tile-local painting of synthetic slides: every pixel is a function of its level-0 position and the seed.

A slide is painted one tile at a time (`slides.write_pyramid_tiles`), so nothing here holds the whole
image. Large-scale layout (where tissue is, where a lesion sits) is decided once on a coarse grid of at
most `LAYOUT_PX` pixels a side; texture (stain noise, nuclei) comes from random generators keyed by
(seed, purpose, block), so a tile painted twice, or its neighbour's halo, gets the same values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw
from scipy import ndimage

LAYOUT_PX = 2048  # longest side of the coarse layout grid
BLOCK = 256  # texture seeds are drawn per block of this many level-0 px


def block_rng(seed: int, purpose: int, by: int, bx: int) -> np.random.Generator:
    """The random generator of one texture block: the same for every tile that reads it."""
    return np.random.default_rng([seed, purpose, by + 1, bx + 1])  # halos reach block -1


@dataclass(frozen=True)
class Layout:
    """The coarse grid: `scale` level-0 px per layout px over a (height, width) slide."""

    height: int
    width: int

    @property
    def scale(self) -> int:
        return max(1, -(-max(self.height, self.width) // LAYOUT_PX))

    @property
    def shape(self) -> tuple[int, int]:
        return -(-self.height // self.scale), -(-self.width // self.scale)

    def fill(self, polygon: np.ndarray) -> np.ndarray:
        """A polygon (level-0 px) rasterised on the layout grid."""
        return fill(polygon, 0, 0, *self.shape, scale=self.scale)

    def erode(self, mask: np.ndarray, radius_px: float) -> np.ndarray:
        """Layout pixels at least `radius_px` level-0 px (city-block) from background or the slide's edge."""
        dist = ndimage.distance_transform_cdt(np.pad(mask, 1), metric="taxicab")[1:-1, 1:-1]
        return np.asarray(dist > radius_px / self.scale)

    def pick(self, mask: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
        """A random level-0 point (x, y) inside a layout mask's pixels."""
        ys, xs = np.nonzero(mask)
        p = rng.integers(len(ys))
        jitter = rng.uniform(0, 1, 2)
        return float((xs[p] + jitter[0]) * self.scale), float((ys[p] + jitter[1]) * self.scale)


def fill(polygon: np.ndarray, y0: int, x0: int, h: int, w: int, scale: int = 1) -> np.ndarray:
    """Boolean mask of a polygon (level-0 px) over the window (y0, x0, h, w) of a grid of `scale` px per cell."""
    img = Image.new("L", (w, h), 0)
    pts = (np.asarray(polygon, dtype=np.float64) / scale) - (x0, y0)
    ImageDraw.Draw(img).polygon([(float(x), float(y)) for x, y in pts], fill=1)
    return np.asarray(img, dtype=bool)


def touches(polygon: np.ndarray, y0: int, x0: int, h: int, w: int) -> bool:
    """Whether a polygon's bounding box meets the window."""
    lo, hi = polygon.min(axis=0), polygon.max(axis=0)
    return bool(hi[0] >= x0 - 1 and lo[0] <= x0 + w + 1 and hi[1] >= y0 - 1 and lo[1] <= y0 + h + 1)


@dataclass(frozen=True)
class SmoothField:
    """A smooth random field in [0, 1]: a coarse random grid, blurred, interpolated bilinearly to any pixel."""

    grid: np.ndarray
    height: int
    width: int

    @classmethod
    def random(cls, shape: tuple[int, int], rng: np.random.Generator, scale: float) -> SmoothField:
        """A field with features about `scale` level-0 px across."""
        small = (max(2, round(shape[0] / scale)), max(2, round(shape[1] / scale)))
        grid = ndimage.gaussian_filter(rng.standard_normal(small), 1.0)
        lo, hi = grid.min(), grid.max()
        return cls((grid - lo) / max(hi - lo, 1e-9), shape[0], shape[1])

    def window(self, y0: int, x0: int, h: int, w: int, scale: int = 1) -> np.ndarray:
        """Field values over a (h, w) window at (y0, x0) of a grid of `scale` px per cell."""
        gh, gw = self.grid.shape
        fy = (np.clip((y0 + np.arange(h)) * scale, 0, self.height - 1)) * (gh - 1) / max(self.height - 1, 1)
        fx = (np.clip((x0 + np.arange(w)) * scale, 0, self.width - 1)) * (gw - 1) / max(self.width - 1, 1)
        iy = np.minimum(fy.astype(int), gh - 2)
        ix = np.minimum(fx.astype(int), gw - 2)
        ty = (fy - iy).astype(np.float32)[:, None]
        tx = (fx - ix).astype(np.float32)[None, :]
        g = self.grid.astype(np.float32)
        top = g[iy][:, ix] * (1 - tx) + g[iy][:, ix + 1] * tx
        bottom = g[iy + 1][:, ix] * (1 - tx) + g[iy + 1][:, ix + 1] * tx
        return np.asarray(top * (1 - ty) + bottom * ty)


def nuclei(seed: int, purpose: int, y0: int, x0: int, h: int, w: int, density: float, radius: float) -> np.ndarray:
    """Map in [0, 1] of round nuclei over a window: `density` nuclei per 10,000 px², `radius` px; the seeds
    are drawn per block, so windows that overlap agree."""
    sigma = radius / 1.5
    halo = int(4 * sigma + 0.5) + 1
    seeds = np.zeros((h + 2 * halo, w + 2 * halo), np.float32)
    per_block = BLOCK * BLOCK * density / 1e4
    for by in range((y0 - halo) // BLOCK, (y0 + h + halo) // BLOCK + 1):
        for bx in range((x0 - halo) // BLOCK, (x0 + w + halo) // BLOCK + 1):
            rng = block_rng(seed, purpose, by, bx)
            count = rng.poisson(per_block)
            ys = by * BLOCK + rng.integers(0, BLOCK, count) - (y0 - halo)
            xs = bx * BLOCK + rng.integers(0, BLOCK, count) - (x0 - halo)
            keep = (ys >= 0) & (ys < seeds.shape[0]) & (xs >= 0) & (xs < seeds.shape[1])
            seeds[ys[keep], xs[keep]] = 1.0
    if not seeds.any():
        return np.zeros((h, w), np.float32)
    blobs = ndimage.gaussian_filter(seeds, sigma, mode="constant") * (2 * np.pi * sigma**2)
    return np.clip(blobs[halo : halo + h, halo : halo + w] * 1.6, 0, 1)


def soften(mask: np.ndarray, sigma: float, halo: int) -> np.ndarray:
    """A boolean mask (painted with `halo` px of margin) blurred to soft edges, margin cropped; a uniform mask
    (a tile all inside or all outside) needs no blur."""
    if mask.all() or not mask.any():
        return np.full((mask.shape[0] - 2 * halo, mask.shape[1] - 2 * halo), float(mask.flat[0]), np.float32)
    soft = ndimage.gaussian_filter(mask.astype(np.float32), sigma)
    return np.clip(soft[halo : soft.shape[0] - halo, halo : soft.shape[1] - halo], 0, 1)


def noise(seed: int, purpose: int, y0: int, x0: int, h: int, w: int) -> np.ndarray:
    """Standard-normal stain noise over a window, (h, w, 1), drawn per block so that windows agree."""
    out = np.empty((h, w, 1), np.float32)
    for by in range(y0 // BLOCK, (y0 + h - 1) // BLOCK + 1):
        for bx in range(x0 // BLOCK, (x0 + w - 1) // BLOCK + 1):
            block = block_rng(seed, purpose, by, bx).standard_normal((BLOCK, BLOCK, 1), dtype=np.float32)
            ya, yb = max(y0, by * BLOCK), min(y0 + h, (by + 1) * BLOCK)
            xa, xb = max(x0, bx * BLOCK), min(x0 + w, (bx + 1) * BLOCK)
            out[ya - y0 : yb - y0, xa - x0 : xb - x0] = block[
                ya - by * BLOCK : yb - by * BLOCK, xa - bx * BLOCK : xb - bx * BLOCK
            ]
    return out
