"""The brain template maps that synthetic brain cases are drawn on."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from dataclasses import dataclass

import numpy as np
import SimpleITK as sitk

Region = tuple[slice, ...]  # a box of the template grid, [k, j, i]
WHOLE: Region = (slice(None), slice(None), slice(None))


@dataclass
class Anatomy:
    """Template maps on one grid (arrays [k, j, i]) and a one-voxel SimpleITK image that carries the grid's origin,
    spacing and direction (the geometry, without a volume's worth of voxels)."""

    reference: sitk.Image
    t1: np.ndarray
    gm: np.ndarray
    wm: np.ndarray
    hull: np.ndarray  # inside the brain's closed outline
    head: np.ndarray

    def csf(self, region: Region = WHOLE) -> np.ndarray:
        """CSF fraction in a box: what the brain hull holds beyond grey and white matter (computed, not stored)."""
        return np.clip(1.0 - self.gm[region] - self.wm[region], 0, 1) * self.hull[region]

    def brain(self, region: Region = WHOLE) -> np.ndarray:
        """Brain fraction (grey + white matter + CSF) in a box."""
        return self.gm[region] + self.wm[region] + self.csf(region)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def return_freed_memory() -> None:
    """Hand the heap's freed pages back to the system (glibc keeps freed mid-size blocks, such as the masks a
    template step drops, in the process); nothing off glibc."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def standard_normal_volume(rng: np.random.Generator, shape: tuple[int, ...], depth: int = 8) -> np.ndarray:
    """Standard normal noise over `shape` as float32, drawn slab by slab: the same numbers, in the same order, as
    one draw of the whole shape, without its float64 copy."""
    out = np.empty(shape, np.float32)
    for k in range(0, shape[0], depth):
        out[k : k + depth] = rng.standard_normal(out[k : k + depth].shape)
    return out
