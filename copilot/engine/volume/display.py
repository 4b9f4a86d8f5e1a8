"""Window/level, presets and colour maps of the embedded viewer.

CT preset values are 3D Slicer's Volumes-module presets (CT-Lung W1400/L-500, CT-Abdomen
W350/L40 used for the mediastinum, CT-Bone W1000/L400, CT-Brain W100/L50). A DICOM image opens
with its own WindowCenter/WindowWidth (the first pair) when it has one. Otherwise automatic
window/level uses robust percentiles of the non-background voxels, as Slicer's auto W/L
does with its histogram, so that a few hot voxels do not wash out the image; when those
percentiles span less than `MIN_WINDOW_FRACTION` of the full value range (an image of a few
values, such as air with one soft-tissue block), the window spans the full range instead, so
no value present in the image is clipped to the same grey as another; a constant image gets
a window of 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from copilot.engine.volume.image import Volume

FIXED_PRESETS: dict[str, tuple[float, float]] = {
    "ct_lung": (1400.0, -500.0),
    "ct_mediastinal": (350.0, 40.0),
    "ct_bone": (1000.0, 400.0),
    "ct_brain": (100.0, 50.0),
}
AUTO_PRESETS: dict[str, tuple[float, float]] = {
    # name: (low percentile, high percentile) of voxels above the background
    "mr_auto": (0.5, 99.5),
    "mr_t2_flair": (1.0, 99.8),
    "pet_auto": (0.0, 99.9),
}
PRESET_NAMES = tuple(FIXED_PRESETS) + tuple(AUTO_PRESETS)
MIN_WINDOW_FRACTION = 0.01  # of the full value range: narrower automatic windows fall back to the full range
COLORMAPS = ("grey", "pet_heat")


@dataclass
class DisplaySettings:
    """Per-volume display state, like Slicer's scalar volume display node."""

    window: float
    level: float
    auto: bool = True
    colormap: str = "grey"
    preset: str | None = None

    def snapshot(self) -> dict[str, object]:
        return {
            "window": round(self.window, 6),
            "level": round(self.level, 6),
            "auto": self.auto,
            "colormap": self.colormap,
            "preset": self.preset,
        }


def auto_window_level(volume: Volume, low: float = 0.5, high: float = 99.5) -> tuple[float, float]:
    """Window and level spanning the [low, high] percentiles of the foreground voxels (cached per volume)."""
    key = ("auto_wl", low, high)
    if key not in volume.cache:
        volume.cache[key] = _auto_window_level(volume, low, high)
    cached: Any = volume.cache[key]
    return (float(cached[0]), float(cached[1]))


def _auto_window_level(volume: Volume, low: float, high: float) -> tuple[float, float]:
    data = volume.data
    step = max(1, data.size // 2_000_000)
    sample = data.ravel()[::step]
    lo_all = float(sample.min())
    fg = sample[sample > lo_all]
    if fg.size < 16:
        fg = sample
    lo, hi = (float(v) for v in np.percentile(fg, [low, high]))
    hi_all = float(sample.max())
    if hi - lo < MIN_WINDOW_FRACTION * (hi_all - lo_all):
        lo, hi = lo_all, hi_all
    if hi <= lo:
        hi = lo + 1.0
    if volume.modality == "PT":
        lo = 0.0 if lo_all >= 0 else lo
    return hi - lo, (hi + lo) / 2.0


def default_display(volume: Volume) -> DisplaySettings:
    """Initial display: PET gets the heat map, everything else auto W/L in grey."""
    if volume.modality == "PT":
        w, lv = auto_window_level(volume, *AUTO_PRESETS["pet_auto"])
        return DisplaySettings(w, lv, auto=True, colormap="pet_heat", preset="pet_auto")
    window = file_window(volume)
    if window is not None:
        return DisplaySettings(window[0], window[1], auto=False)
    w, lv = auto_window_level(volume)
    return DisplaySettings(w, lv, auto=True)


def file_window(volume: Volume) -> tuple[float, float] | None:
    """(window, level) the image file itself recommends (DICOM WindowWidth/WindowCenter), when valid."""
    try:
        w, lv = float(volume.metadata["WindowWidth"]), float(volume.metadata["WindowCenter"])
    except (KeyError, ValueError):
        return None
    return (w, lv) if np.isfinite(w) and np.isfinite(lv) and w >= 1 else None


def preset_settings(volume: Volume, preset: str) -> DisplaySettings:
    """Display settings for a named preset."""
    if preset in FIXED_PRESETS:
        w, lv = FIXED_PRESETS[preset]
        return DisplaySettings(w, lv, auto=False, colormap="grey", preset=preset)
    w, lv = auto_window_level(volume, *AUTO_PRESETS[preset])
    cmap = "pet_heat" if preset == "pet_auto" else "grey"
    return DisplaySettings(w, lv, auto=False, colormap=cmap, preset=preset)


def to_uint8(values: np.ndarray, window: float, level: float) -> np.ndarray:
    """Map scalar values through a linear window/level ramp to 0–255."""
    lo = level - window / 2.0
    scale = 255.0 / max(window, 1e-12)
    out = (values - np.float32(lo)) * np.float32(scale)
    np.clip(out, 0, 255, out=out)
    return out.astype(np.uint8)


# 3D Slicer's PET-Heat colour node (vtkMRMLPETProceduralColorNode, type Heat): its transfer function's
# control points (index 0–255, R, G, B), as slicer-core 5.13 reports them.
PET_HEAT_POINTS = np.array(
    [
        [0, 0.0, 0.0, 0.0],
        [35, 0.36, 0.0, 0.0],
        [38, 0.5, 0.0, 0.0],
        [50, 0.7, 0.1, 0.0],
        [70, 0.7, 0.5, 0.0],
        [87, 1.0, 1.0, 0.0],
        [255, 1.0, 1.0, 1.0],
    ]
)


def _heat_lut() -> np.ndarray:
    """Slicer's PET-Heat table: black → dark red → orange → yellow → white."""
    x = np.arange(256.0)
    rgb = np.stack([np.interp(x, PET_HEAT_POINTS[:, 0], PET_HEAT_POINTS[:, c]) for c in (1, 2, 3)], axis=1)
    return (rgb * 255.0 + 0.5).astype(np.uint8)


LUTS: dict[str, np.ndarray] = {
    "grey": np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1),
    "pet_heat": _heat_lut(),
}
