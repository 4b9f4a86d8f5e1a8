"""Multi-frame DICOM instances (enhanced CT/MR/PET, RT Dose) in a series folder.

A folder whose one image is a multi-frame instance opens exactly as that file does. Several multi-frame
instances of one series are put together when each states its frame positions (per-frame functional groups or
an RT Dose GridFrameOffsetVector), all share the orientation, pixel grid and size, and their frames together
make one regular stack; otherwise they are refused by name (`multiframe_series`, or the slice-position codes
of `dicom_geometry`). Multi-frame instances mixed with single-frame images are `inconsistent_series`.
"""

from __future__ import annotations

import numpy as np
import pydicom

from copilot.engine.volume import dicom_geometry as geo
from copilot.engine.volume.image import Volume, VolumeLoadError


def frame_count(ds: pydicom.Dataset) -> int:
    """NumberOfFrames of a dataset (1 when absent or unreadable)."""
    try:
        return max(1, int(ds.get("NumberOfFrames", 1) or 1))
    except (TypeError, ValueError):
        return 1


def check_mixture(headers: list[pydicom.Dataset], name: str) -> bool:
    """True when the series is made of multi-frame instances; refuses one mixing them with single frames."""
    multi = sum(frame_count(h) > 1 for h in headers)
    if multi and multi != len(headers):
        raise VolumeLoadError(
            f"{name}: {multi} multi-frame instance(s) mixed with {len(headers) - multi} single-frame image(s) "
            "in one series",
            "inconsistent_series",
        )
    return multi > 0


def assemble(parts: list[Volume], headers: list[pydicom.Dataset], name: str, source: str) -> Volume:
    """One volume from the volumes of several multi-frame instances of a series, or a refusal by name."""
    if len(parts) == 1:
        return Volume(parts[0].name, parts[0].data, parts[0].ijk_to_ras, parts[0].modality, source)
    frames = [geo.header_frames(h, name) for h in headers]
    if any(f is None for f in frames):
        raise VolumeLoadError(
            f"{name}: {len(parts)} multi-frame instances, not all stating their frame positions: they cannot be "
            "put together as one volume; open each file on its own",
            "multiframe_series",
        )
    first = parts[0]
    grid = first.ijk_to_ras[:3, :2]
    if any(p.data.shape[1:] != first.data.shape[1:] or not np.allclose(p.ijk_to_ras[:3, :2], grid, atol=1e-4)
           for p in parts):  # fmt: skip
        raise VolumeLoadError(
            f"{name}: {len(parts)} multi-frame instances with different pixel grids or orientations",
            "multiframe_series",
        )
    positions = np.concatenate([f[0] for f in frames if f is not None])
    _, step = geo.check_frames(positions, frames[0][1] if frames[0] is not None else np.zeros(6), name)
    normal = first.ijk_to_ras[:3, 2] / np.linalg.norm(first.ijk_to_ras[:3, 2])
    slices = sorted(
        ((float(normal @ (p.ijk_to_ras @ [0.0, 0.0, k, 1.0])[:3]), n, k) for n, p in enumerate(parts)
         for k in range(p.data.shape[0])),
    )  # fmt: skip
    data = np.stack([parts[n].data[k] for _, n, k in slices])
    ras = first.ijk_to_ras.copy()
    _, n0, k0 = slices[0]
    ras[:3, 2] = normal * step
    ras[:3, 3] = (parts[n0].ijk_to_ras @ [0.0, 0.0, k0, 1.0])[:3]
    vol = Volume(first.name, data, ras, first.modality, source)
    geo.verify_placement(vol, positions, name)
    return vol
