"""The first image of a study, read with numpy and the standard library alone: the middle slice of a NIfTI file
or of an uncompressed DICOM series, the lowest pyramid level of a slide.

The desktop paints it while the viewer's own modules load (they take seconds on a busy machine): only the bytes of
that one slice are read (a compressed NIfTI file is inflated up to it, a DICOM file's header is parsed up to its
pixel data). Anything unusual (compressed DICOM, several series, a 4D DICOM, a slide without a small level) gives
None, and the viewer shows the study when it is ready, as before. The image is for the eye only: no tool, trace or
measurement ever reads it.
"""

from __future__ import annotations

import gzip
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from copilot.engine.dicom_header import read_header

NIFTI_DTYPES = {2: "u1", 4: "i2", 8: "i4", 16: "f4", 64: "f8", 256: "i1", 512: "u2", 768: "u4"}
MAX_DICOM_FILES = 4000  # a folder with more files than this waits for the viewer
MAX_SLIDE_PIXELS = 4096 * 4096  # the lowest level of a slide larger than this is not read here
MAX_INFLATE = 128 << 20  # a compressed NIfTI file is inflated up to its middle slice only when that is nearer
# the screen's right and down directions (RAS) of each plane, as the viewer's slice views show them
SCREEN = {
    "axial": ((-1.0, 0.0, 0.0), (0.0, -1.0, 0.0)),
    "sagittal": ((0.0, -1.0, 0.0), (0.0, 0.0, -1.0)),
    "coronal": ((-1.0, 0.0, 0.0), (0.0, 0.0, -1.0)),
}


@dataclass(frozen=True)
class FirstImage:
    """Display-ready pixels (uint8, rows × columns, grey or RGB), the height of a pixel in widths, and a caption."""

    pixels: np.ndarray
    pixel_aspect: float
    caption: str


def first_image(path: str | Path) -> FirstImage | None:
    """The study's first image at `path` (a NIfTI file, a DICOM folder, a slide, a case pack), or None."""
    p = Path(path)
    try:
        if p.is_dir():
            case = p / "case.json"
            if case.is_file():
                return _case_pack(p, case)
            packs = sorted(c for c in p.iterdir() if c.is_dir() and (c / "case.json").is_file())
            if packs:  # a folder of case packs opens at its first
                return _case_pack(packs[0], packs[0] / "case.json")
            return dicom_middle_slice(p)
        name = p.name.lower()
        if name.endswith((".nii", ".nii.gz")):
            return nifti_middle_slice(p)
        if name.endswith((".tif", ".tiff", ".svs")):
            return slide_lowest_level(p)
    except (OSError, ValueError, KeyError, IndexError, EOFError, struct.error):
        return None  # the viewer says what is wrong with the study
    return None


def _case_pack(folder: Path, case: Path) -> FirstImage | None:
    """A case pack's default volume (or its first image)."""
    inputs = json.loads(case.read_text(encoding="utf-8")).get("inputs", {})
    files = [str(f) for f in inputs.get("volumes", [])] + [str(f) for f in inputs.get("slides", [])]
    default = inputs.get("default_volume")
    chosen = next((f for f in files if default and Path(f).name.split(".")[0] == default), files[0] if files else None)
    return None if chosen is None else first_image(folder / chosen)


def nifti_middle_slice(path: Path) -> FirstImage | None:
    """The middle slice of a NIfTI-1 file's first volume, as stored (only its bytes are read)."""
    opener: Any = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        head = fh.read(348)
        order = "<" if struct.unpack("<i", head[:4])[0] == 348 else ">"
        if struct.unpack(order + "i", head[:4])[0] != 348 or head[344:347] != b"n+1":
            return None  # NIfTI-2 or a header with a separate .img: the viewer reads them
        dim = struct.unpack(order + "8h", head[40:56])
        code = struct.unpack(order + "h", head[70:72])[0]
        pixdim = struct.unpack(order + "8f", head[76:108])
        offset = int(struct.unpack(order + "f", head[108:112])[0])
        slope, inter = struct.unpack(order + "2f", head[112:120])
        if code not in NIFTI_DTYPES or dim[0] < 2:
            return None
        nx, ny, nz = dim[1], dim[2], dim[3] if dim[0] >= 3 else 1
        dtype = np.dtype(order + NIFTI_DTYPES[code])
        size = nx * ny * dtype.itemsize
        start = offset + (nz // 2) * size
        if opener is gzip.open and start > MAX_INFLATE:
            return None  # seconds of inflating: the viewer's own read comes soon enough
        fh.seek(start)
        data = fh.read(size)
    if len(data) < size or nx < 1 or ny < 1:
        return None
    values = np.frombuffer(data, dtype).reshape(ny, nx).astype(np.float32)
    if slope not in (0.0, 1.0) and np.isfinite(slope):
        values = values * slope + inter
    axes = _nifti_axes(head, order, pixdim)
    return _oriented(values, axes, None, f"{path.name}: slice {nz // 2 + 1} of {nz}")


def _nifti_axes(head: bytes, order: str, pixdim: tuple[float, ...]) -> np.ndarray:
    """Voxel axes i, j, k in RAS mm (columns of the sform, else of the qform, else the voxel sizes)."""
    qform, sform = struct.unpack(order + "2h", head[252:256])
    if sform > 0:
        rows = np.array(struct.unpack(order + "12f", head[280:328]), dtype=float).reshape(3, 4)
        return rows[:, :3]
    sizes = np.array([abs(v) or 1.0 for v in pixdim[1:4]])
    if qform > 0:
        b, c, d = struct.unpack(order + "3f", head[256:268])
        a = np.sqrt(max(0.0, 1.0 - (b * b + c * c + d * d)))
        rot = np.array([
            [a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)],
            [2 * (b * c + a * d), a * a + c * c - b * b - d * d, 2 * (c * d - a * b)],
            [2 * (b * d - a * c), 2 * (c * d + a * b), a * a + d * d - c * c - b * b],
        ])  # fmt: skip
        qfac = -1.0 if pixdim[0] < 0 else 1.0
        return rot * (sizes * np.array([1.0, 1.0, qfac]))
    return np.diag(sizes)


def dicom_middle_slice(folder: Path) -> FirstImage | None:
    """The middle slice (along the slice normal) of a folder's one uncompressed single-frame series."""
    headers, seen = [], 0
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "hidden" and not d.startswith("."))
        seen += len(filenames)
        if seen > MAX_DICOM_FILES:
            return None
        for name in sorted(filenames):
            header = read_header(Path(dirpath) / name)
            if header is not None:
                headers.append(header)
    images = [h for h in headers if h.pixel_offset is not None]
    if not images or len({h.series_uid for h in images}) != 1 or any(h.frames > 1 for h in images):
        return None  # several series: the clinician (or --series) chooses; multi-frame: the viewer reads it
    first = images[0]
    cols, rows = np.array(first.orientation[:3]), np.array(first.orientation[3:])
    normal = np.cross(cols, rows)
    images.sort(key=lambda h: float(np.dot(normal, h.position)))
    middle = images[len(images) // 2]
    pixels = middle.pixels()
    if pixels is None:
        return None
    dy, dx = middle.spacing
    lps_to_ras = np.array([-1.0, -1.0, 1.0])
    axes = np.stack([cols * lps_to_ras * dx, rows * lps_to_ras * dy, normal * lps_to_ras], axis=1)
    label = f"{folder.name}: slice {len(images) // 2 + 1} of {len(images)}"
    return _oriented(pixels, axes, middle.window, label)


def slide_lowest_level(path: Path) -> FirstImage | None:
    """The lowest-resolution level of a (pyramidal) TIFF slide, as RGB."""
    import tifffile  # loaded here only: a volume's first image needs numpy alone

    with tifffile.TiffFile(path) as tif:
        series = tif.series[0]
        level = series.levels[-1]
        shape = level.shape
        if len(shape) != 3 or shape[-1] not in (3, 4) or shape[0] * shape[1] > MAX_SLIDE_PIXELS:
            return None
        pixels = np.asarray(level.asarray())
    if pixels.dtype != np.uint8:
        return None
    full = series.levels[0].shape
    return FirstImage(np.ascontiguousarray(pixels[..., :3]), 1.0, f"{path.name}: {full[1]}×{full[0]} px")


def _oriented(values: np.ndarray, axes: np.ndarray, window: tuple[float, float] | None, caption: str) -> FirstImage:
    """A slice (rows × columns; `axes` its column, row and normal steps in RAS mm) turned to the view the viewer
    would show it in, windowed to uint8."""
    col, row, normal = (np.asarray(axes[:, n], dtype=float) for n in range(3))
    plane = ("sagittal", "coronal", "axial")[int(np.argmax(np.abs(normal)))]
    right, down = (np.array(v) for v in SCREEN[plane])
    col_len, row_len = float(np.linalg.norm(col)) or 1.0, float(np.linalg.norm(row)) or 1.0
    if abs(np.dot(row, right)) / row_len > abs(np.dot(col, right)) / col_len:  # the rows run across the screen
        values, col, row, col_len, row_len = values.T, row, col, row_len, col_len
    if np.dot(col, right) < 0:
        values = values[:, ::-1]
    if np.dot(row, down) < 0:
        values = values[::-1, :]
    return FirstImage(_windowed(values, window), row_len / col_len, caption)


def _windowed(values: np.ndarray, window: tuple[float, float] | None) -> np.ndarray:
    """uint8 grey levels: the stored window (centre, width), else the 0.5–99.5th percentiles of the non-zero."""
    if window is not None and window[1] > 0:
        low, high = window[0] - window[1] / 2, window[0] + window[1] / 2
    else:
        finite = values[np.isfinite(values) & (values != 0)]
        if finite.size == 0:
            return np.zeros(values.shape, np.uint8)
        low, high = (float(v) for v in np.percentile(finite, (0.5, 99.5)))
    scaled = (np.nan_to_num(values, nan=low) - low) * (255.0 / max(high - low, 1e-6))
    return np.ascontiguousarray(np.clip(scaled, 0, 255).astype(np.uint8))
