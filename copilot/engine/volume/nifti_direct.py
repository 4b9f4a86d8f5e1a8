"""A NIfTI volume's voxels read straight into their float32 array, a chunk at a time, while ITK supplies only
the geometry (`ReadImageInformation`): loading peaks at about the array's own size instead of ITK's stored copy,
its float32 cast and numpy's copy of that (3.4× the voxel bytes)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

CHUNK_VOXELS = 1 << 20


def _scaling(header: Any) -> tuple[float, float] | None:
    """The slope and intercept ITK applies, or None where its rules are not mirrored here (then ITK reads)."""
    slope, inter = float(header["scl_slope"]), float(header["scl_inter"])
    if not (np.isfinite(slope) and np.isfinite(inter)):
        return None
    if slope == 0.0:
        return (1.0, 0.0) if inter == 0.0 else None
    return slope, inter


def read_nifti_direct(path: Path, header: Any) -> tuple[np.ndarray, sitk.ImageFileReader] | None:
    """`data[k, j, i]` as float32 and the reader holding ITK's geometry for a plain 3D scalar NIfTI file; None
    for anything else (4D, vectors, complex or RGB voxels, unusual scaling), which ITK then reads as before."""
    dims = [int(d) for d in header["dim"]]
    dtype = header.get_data_dtype()
    scale = _scaling(header)
    if dims[0] != 3 or dtype.kind not in "iuf" or dtype.itemsize > 8 or scale is None:
        return None
    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    reader.ReadImageInformation()
    nx, ny, nz = dims[1:4]
    if reader.GetDimension() != 3 or tuple(reader.GetSize()) != (nx, ny, nz) or reader.GetNumberOfComponents() != 1:
        return None
    out = np.empty(nx * ny * nz, dtype=np.float32)
    slope, inter = scale
    opener: Any = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        skip = int(float(header["vox_offset"]))
        while skip > 0:  # a gzip stream cannot seek cheaply backwards; forwards is a read
            skip -= len(fh.read(min(skip, 1 << 20)) or b"x" * skip)
        for start in range(0, out.size, CHUNK_VOXELS):
            count = min(CHUNK_VOXELS, out.size - start)
            raw = fh.read(count * dtype.itemsize)
            if len(raw) != count * dtype.itemsize:
                return None  # shorter than checked a moment ago (changed meanwhile): ITK reports it
            values = np.frombuffer(raw, dtype=dtype)
            if (slope, inter) == (1.0, 0.0):
                out[start : start + count] = values
            else:
                out[start : start + count] = values.astype(np.float64) * slope + inter
    return out.reshape(nz, ny, nx), reader
