"""The value under the cursor (Qt-free): what the status bar says about a RAS point of a slice view.

The value is the nearest voxel's, as the viewer stores it: DICOM pixels are already rescaled
(RescaleSlope/Intercept), so a CT reads in Hounsfield units; a PET series whose tags allow it also reads as
SUVbw (and SUVlbm/SUVbsa where height and sex allow; see `copilot.engine.volume.suv`), with the stored
activity beside it; anything else reads as the stored
value. Outside the volume there is no value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from copilot.engine.volume.suv import volume_suv

PET_UNITS = {"BQML": "Bq/ml", "GML": "g/ml", "CNTS": "counts"}


def voxel_value(volume: Any, ras: list[float] | np.ndarray) -> float | None:
    """The stored value of the voxel nearest a RAS point; None outside the volume."""
    ijk = volume.nearest_voxel(np.asarray(ras, dtype=float))
    if ijk is None:
        return None
    i, j, k = ijk
    return float(volume.data[k, j, i])


def _number(value: float) -> str:
    if not np.isfinite(value):
        return str(value)
    return f"{value:.0f}" if abs(value) >= 1000 or float(value).is_integer() else f"{value:.4g}"


def value_text(volume: Any, value: float) -> str:
    """A stored value in the volume's own terms: HU for CT, SUVbw for PET where the tags allow, else as stored
    (with the units the file names, e.g. Gy for an RT Dose)."""
    modality = str(getattr(volume, "modality", "") or "")
    meta = getattr(volume, "metadata", {}) or {}
    unit = str(meta.get("units") or "")
    if modality == "CT" and unit in ("", "HU"):
        return f"{value:.0f} HU"
    if modality == "PT" and unit:
        stored = f"{_number(value)} {PET_UNITS.get(unit.upper(), unit)}"
        suv = volume_suv(volume)
        if suv.bw is None:
            return f"{stored} (no SUV: {suv.reason})"
        shown = [f"{name} {value * factor:.2f}" for name, factor in
                 (("SUVbw", suv.bw), ("SUVlbm", suv.lbm), ("SUVbsa", suv.bsa)) if factor is not None]  # fmt: skip
        return "  ".join(shown) + ("" if unit.upper() == "GML" else f" ({stored})")
    return f"{_number(value)} {unit}".strip()


def readout(ras: list[float], volumes: list[tuple[str, Any]]) -> str:
    """The status-bar line for a RAS point: its coordinates, then each shown volume's value (B: background,
    F: foreground)."""
    parts = [f"R {ras[0]:.1f}  A {ras[1]:.1f}  S {ras[2]:.1f} mm"]
    for tag, volume in volumes:
        value = voxel_value(volume, ras)
        shown = "outside" if value is None else value_text(volume, value)
        parts.append(f"{tag}: {volume.name} {shown}")
    return "   ".join(parts)


def slide_readout(x: float, y: float, mpp: list[float] | None, dims: tuple[int, int]) -> str:
    """The status-bar line for a slide point: level-0 pixels and, when the slide is calibrated, µm."""
    if not (0 <= x < dims[0] and 0 <= y < dims[1]):
        return f"x {x:.0f}  y {y:.0f} px (outside the slide)"
    text = f"x {x:.0f}  y {y:.0f} px (level 0)"
    if mpp:
        text += f"   {x * mpp[0]:.1f} µm, {y * mpp[1 if len(mpp) > 1 else 0]:.1f} µm ({mpp[0]:.3f} µm/px)"
    return text
