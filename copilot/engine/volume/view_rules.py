"""The radiology viewer's argument rules and limits, shared by every backend.

Each rule raises `ViewerError` with its code and message before a backend changes anything, so the
embedded viewer and the Slicer scene viewer refuse the same calls with the same words.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from copilot.engine.geometry import VIEW_NAMES, VIEW_ORIENTATION
from copilot.engine.volume.display import AUTO_PRESETS, FIXED_PRESETS
from copilot.errors import ViewerError

LAYOUTS: dict[str, tuple[str, ...]] = {
    "three_up": ("red", "yellow", "green"),
    "one_up_red": ("red",),
    "one_up_yellow": ("yellow",),
    "one_up_green": ("green",),
}
LAYOUT_ALIASES = {
    "FourUp": "three_up",
    "Conventional": "three_up",
    "OneUpRedSlice": "one_up_red",
    "OneUpYellowSlice": "one_up_yellow",
    "OneUpGreenSlice": "one_up_green",
    "axial": "one_up_red",
    "sagittal": "one_up_yellow",
    "coronal": "one_up_green",
}
FUSION_MODES = ("blend", "add")
MAX_ZOOM_FOV_FACTOR = 10.0  # widest FOV: 10× the volume's extent
MIN_FOV_MM = 1.0
TOLERANCE_MM = 1e-6  # offsets and points this close outside a range still count as inside


def lookup(table: dict[str, Any], ref: str, kind: str) -> tuple[str, Any]:
    """(id, node) of a derived node by id or unique name."""
    if ref in table:
        return ref, table[ref]
    named = [(nid, node) for nid, node in table.items() if node.name == ref]
    if len(named) == 1:
        return named[0]
    raise ViewerError(f"unknown_{kind}", f"no {kind} {ref!r}; {kind}s: {[n.name for n in table.values()]}")


def check_name_free(table: dict[str, Any], name: str, kind: str) -> None:
    """Refuse a new derived node whose name another node of the same kind has."""
    if any(n.name == name for n in table.values()):
        raise ViewerError("name_taken", f"a {kind} named {name!r} exists already")


def resolve_volume(
    volumes: dict[str, Any], active: str | None, volume_id: str | None = None, volume_name: str | None = None
) -> str:
    """Node id for an id or a name (exact, then case-insensitive); the active volume when neither."""
    names = [v.name for v in volumes.values()]
    if volume_id is not None:
        if volume_id in volumes:
            return volume_id
        raise ViewerError("unknown_volume", f"no volume with id {volume_id!r}; loaded: {names}")
    if volume_name is not None:
        for vid, v in volumes.items():
            if v.name == volume_name:
                return vid
        matches = [vid for vid, v in volumes.items() if v.name.lower() == volume_name.lower()]
        if len(matches) == 1:
            return matches[0]
        raise ViewerError("unknown_volume", f"no volume named {volume_name!r}; loaded: {names}")
    if active is None:
        raise ViewerError("no_volume", "no volume is loaded")
    return active


def check_view(name: str) -> None:
    """Refuse a view name other than red, yellow or green."""
    if name not in VIEW_NAMES:
        raise ViewerError("unknown_view", f"unknown view {name!r}; views are red, yellow, green")


def layout_name(layout: str) -> str:
    """The layout's own name for a name or an alias (Slicer's layout names included)."""
    name = LAYOUT_ALIASES.get(layout, layout)
    if name not in LAYOUTS:
        raise ViewerError("invalid_layout", f"unknown layout {layout!r}; use one of {sorted(LAYOUTS)}")
    return name


def check_orientation(orientation: str) -> None:
    """Refuse an orientation other than the three standard presets."""
    if orientation not in VIEW_ORIENTATION.values():
        raise ViewerError("invalid_arguments", "orientation must be axial, sagittal or coronal")


def check_slice_step(step: float | None) -> None:
    """A slider step is a positive number of mm (or None: the volume's own spacing)."""
    if step is not None and not (math.isfinite(step) and step > 0):
        raise ViewerError("invalid_arguments", "spacing must be a positive number of mm")


def check_offset(view: str, offset: float, lo: float, hi: float) -> None:
    """Raise unless `offset` lies inside the view's slice offset range [lo, hi]."""
    if not math.isfinite(offset) or offset < lo - TOLERANCE_MM or offset > hi + TOLERANCE_MM:
        raise ViewerError(
            "offset_out_of_range", f"offset {offset} mm is outside the {view} range [{lo:.3f}, {hi:.3f}] mm"
        )


def check_zoom_factor(factor: float) -> None:
    """A zoom factor is a positive finite number (>1 magnifies)."""
    if not (math.isfinite(factor) and factor > 0):
        raise ViewerError("invalid_arguments", "factor must be a positive number")


def check_zoom_fov(factor: float, fov: tuple[float, float], corners_ras: np.ndarray) -> None:
    """Refuse a zoom whose field of view would fall below 1 mm or beyond 10× the volume's extent."""
    extent = float(np.ptp(corners_ras, axis=0).max()) + 1.0
    new_fov = max(fov) / factor
    if new_fov < MIN_FOV_MM or new_fov > MAX_ZOOM_FOV_FACTOR * extent:
        raise ViewerError(
            "invalid_arguments",
            f"zoom factor {factor} gives a field of view of {new_fov:.2f} mm, outside "
            f"[{MIN_FOV_MM}, {MAX_ZOOM_FOV_FACTOR * extent:.0f}] mm",
        )


def jump_point(ras: Any) -> np.ndarray:
    """The RAS point of a jump as three finite floats."""
    point = np.asarray(ras, dtype=float)
    if point.shape != (3,) or not np.all(np.isfinite(point)):
        raise ViewerError("invalid_arguments", "ras must be three finite numbers")
    return point


def check_inside(ras: np.ndarray, corners_ras: np.ndarray) -> None:
    """Refuse a jump to a point outside the volume's RAS bounding box."""
    lo = corners_ras.min(axis=0) - TOLERANCE_MM
    hi = corners_ras.max(axis=0) + TOLERANCE_MM
    if np.any(ras < lo) or np.any(ras > hi):
        raise ViewerError("out_of_volume", f"RAS {ras.tolist()} lies outside the volume's bounds")


def check_window_level(window: float, level: float) -> None:
    """A window is a positive width and the level a finite centre."""
    if not (math.isfinite(window) and window > 0 and math.isfinite(level)):
        raise ViewerError("invalid_arguments", "window must be > 0 and level finite")


def check_preset(preset: str) -> None:
    """Refuse a display preset that is neither fixed nor automatic."""
    if preset not in FIXED_PRESETS and preset not in AUTO_PRESETS:
        raise ViewerError("invalid_arguments", f"unknown preset {preset!r}")


def check_fusion(bg: str, fg: str | None, opacity: float, mode: str) -> None:
    """A known compositing mode, an opacity in [0, 1] and two different volumes."""
    if mode not in FUSION_MODES:
        raise ViewerError("invalid_arguments", f"mode must be one of {FUSION_MODES}")
    if not (math.isfinite(opacity) and 0.0 <= opacity <= 1.0):
        raise ViewerError("invalid_arguments", "foreground_opacity must lie in [0, 1]")
    if fg is not None and fg == bg:
        raise ViewerError("invalid_arguments", "foreground and background must be different volumes")
