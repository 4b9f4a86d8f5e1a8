"""What the toolbar's selectors show, read from the scene alone (Qt-free): background and foreground series, the
fusion opacity the scene is drawn with, and the background's window — a preset by name, automatic, the image
file's own window ("DICOM 400/40") or any other ("custom 1500/−600", after a drag). The toolbar shows this after
every change, whoever made it (the agent, a hanging protocol, a drag, an undo), so a box never says one thing while
the views show another, and touching it starts from what is shown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OWN, CUSTOM = "file", "custom"  # the W/L box's entries for a window that is not a preset


@dataclass(frozen=True)
class Selectors:
    background: str | None
    foreground: str | None
    opacity_percent: int
    wl: str | None  # a preset's name, "auto", OWN, CUSTOM; None without a background
    wl_title: str  # what the W/L box says for OWN and CUSTOM ("" otherwise)


def number(value: float) -> str:
    """A window figure as a radiologist writes it: no needless decimals, a true minus sign."""
    text = f"{value:.0f}" if abs(value - round(value)) < 0.05 or abs(value) >= 100 else f"{value:.1f}"
    return text.replace("-", "−")


def wl_words(window: float, level: float) -> str:
    return f"{number(window)}/{number(level)}"


def selectors(state: dict[str, Any], file_window: tuple[float, float] | None = None) -> Selectors:
    """The selectors for a viewer state; `file_window` is the background image's own (window, level), if any."""
    background = state.get("background_volume")
    display = (state.get("display") or {}).get(background) or {}
    opacity = round(100.0 * float(state.get("foreground_opacity") or 0.0))
    wl: str | None = None
    title = ""
    if display:
        window, level = float(display["window"]), float(display["level"])
        if display.get("preset"):
            wl = str(display["preset"])
        elif display.get("auto"):
            wl = "auto"
        elif file_window is not None and abs(file_window[0] - window) < 1e-3 and abs(file_window[1] - level) < 1e-3:
            wl, title = OWN, f"DICOM {wl_words(window, level)}"
        else:
            wl, title = CUSTOM, f"custom {wl_words(window, level)}"
    return Selectors(background, state.get("foreground_volume"), opacity, wl, title)
