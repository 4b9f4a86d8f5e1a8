"""A PET read in SUV (Qt-free): its window given as an SUVbw range — a preset such as 0–6 or a typed range such
as "2.5-8" — turned into the window/level of the stored values (Bq/ml) that the `wl` call sets, the range read
back from a window, and the colour bar of the foreground in SUV (its colour map's colours with the range's ends
and middle). A PET whose tags allow no SUV is windowed in its stored values and says why."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from copilot.engine.volume.display import LUTS
from copilot.engine.volume.suv import volume_suv_factor

SUV_PRESETS = ((0.0, 3.0), (0.0, 6.0), (0.0, 10.0), (0.0, 15.0))  # SUVbw ranges offered by the PET box
MAX_SUV = 1000.0
_RANGE = re.compile(r"^\s*(?:suv\w*\s*)?(-?\d+(?:\.\d+)?)\s*(?:-|–|—|to|\.\.|\s)\s*(-?\d+(?:\.\d+)?)\s*$", re.I)


def number(value: float) -> str:
    """An SUV figure: whole numbers without decimals, one decimal otherwise, never "-0"."""
    value = 0.0 if abs(value) < 0.05 else value
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def range_words(lo: float, hi: float) -> str:
    """'SUV 0–6'."""
    return f"SUV {number(lo)}–{number(hi)}"


def parse_range(text: str) -> tuple[float, float]:
    """An SUV range as typed ("0-6", "SUV 2.5–8", "1 to 4"); ValueError saying what is expected otherwise."""
    m = _RANGE.match(text or "")
    if not m:
        raise ValueError(f"not an SUV range: {text!r}; type two numbers such as 0-6")
    lo, hi = float(m.group(1)), float(m.group(2))
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo < 0 or hi <= lo or hi > MAX_SUV:
        raise ValueError(f"an SUV range runs from 0 or more up to at most {MAX_SUV:.0f}, low before high: {text!r}")
    return lo, hi


def suv_factor(volume: Any) -> float | None:
    """SUVbw per stored value of a PET volume, None for another modality or a PET without SUV."""
    if getattr(volume, "modality", None) != "PT":
        return None
    factor, _ = volume_suv_factor(volume)
    return factor if factor and factor > 0 else None


def no_suv_reason(volume: Any) -> str:
    """Why a volume cannot be windowed in SUV."""
    if getattr(volume, "modality", None) != "PT":
        return "not a PET"
    return volume_suv_factor(volume)[1] or "no SUV"


def suv_window(factor: float, lo: float, hi: float) -> tuple[float, float]:
    """(window, level) in stored values for the SUV range lo–hi."""
    return round((hi - lo) / factor, 6), round((hi + lo) / 2.0 / factor, 6)


def suv_range(factor: float, window: float, level: float) -> tuple[float, float]:
    """The SUV range a stored-value window shows."""
    return (level - window / 2.0) * factor, (level + window / 2.0) * factor


@dataclass(frozen=True)
class ColourBar:
    """The colour bar of a layer: its title, its colours bottom to top (RGB), labels at fractions of its height."""

    title: str
    colours: tuple[tuple[int, int, int], ...]
    labels: tuple[tuple[float, str], ...]


def colour_bar(volume: Any, display: dict[str, Any], name: str) -> ColourBar | None:
    """The colour bar of a PET layer in SUV (in its stored units without SUV); None for other layers."""
    if getattr(volume, "modality", None) != "PT":
        return None
    lut = LUTS.get(str(display.get("colormap") or "grey"), LUTS["grey"])
    colours = tuple(tuple(int(c) for c in lut[i][:3]) for i in range(0, 256, 8))
    window, level = float(display["window"]), float(display["level"])
    factor = suv_factor(volume)
    if factor is not None:
        lo, hi = suv_range(factor, window, level)
        title = f"{name} {range_words(lo, hi)}"
    else:
        lo, hi = level - window / 2.0, level + window / 2.0
        title = f"{name} {number(lo)}–{number(hi)} (no SUV: {no_suv_reason(volume)})"
    labels = ((0.0, number(lo)), (0.5, number((lo + hi) / 2.0)), (1.0, number(hi)))
    return ColourBar(title, colours, labels)  # type: ignore[arg-type]
