"""A proposed handler call in the clinician's words ("set red slice to S −12.5 mm"), for the approval the panel
asks: every argument is said, none hidden in a tooltip."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

VIEW_AXIS = {"red": "S", "yellow": "R", "green": "A", "axial": "S", "sagittal": "R", "coronal": "A"}
RENDER_ARGS = ("size", "output")  # how the result is pictured, not what the call does


def mm(value: Any) -> str:
    """A length in mm with a true minus sign: `−12.5 mm`."""
    number = float(value)
    text = f"{abs(number):g}"
    return f"{'−' if number < 0 else ''}{text} mm"


def point(ras: Any) -> str:
    """A RAS point in words: `R 10 mm, A −4 mm, S 22.5 mm`."""
    return ", ".join(f"{axis} {mm(v)}" for axis, v in zip("RAS", ras, strict=False))


def _slice(a: dict[str, Any]) -> str:
    view = str(a.get("view", "red"))
    return f"set {view} slice to {VIEW_AXIS.get(view, '')} {mm(a.get('offset', 0))}".replace("  ", " ")


def _scroll(a: dict[str, Any]) -> str:
    n = int(a.get("num_slices", 1))
    return f"scroll {a.get('view', 'red')} {a.get('direction', 'up')} by {n} slice{'s' if n != 1 else ''}"


def _wl(a: dict[str, Any]) -> str:
    if a.get("auto"):
        return f"set automatic window/level on {a.get('view', 'red')}"
    return f"set window {a.get('window')} / level {a.get('level')} on {a.get('view', 'red')}"


def _fusion(a: dict[str, Any]) -> str:
    fg = a.get("foreground_volume_ref")
    if not fg:
        return f"show {a.get('background_volume_ref')} alone"
    pct = round(float(a.get("foreground_opacity", 0.5)) * 100)
    return f"show {fg} over {a.get('background_volume_ref')} at {pct} % opacity"


def _distance(a: dict[str, Any]) -> str:
    ends = [point(a[k]) for k in ("ras_a", "ras_b") if a.get(k) is not None]
    where = " to ".join(ends) if ends else f"between two points of {a.get('view', 'red')}"
    return f"measure the distance from {where}" if ends else f"measure the distance {where}"


SAYINGS: dict[str, Callable[[dict[str, Any]], str]] = {
    "set_slice_offset": _slice,
    "scroll": _scroll,
    "wl": _wl,
    "fusion": _fusion,
    "measure_distance": _distance,
    "jump": lambda a: f"centre every view on {point(a.get('ras', []))}",
    "zoom": lambda a: f"zoom {a.get('view', 'red')} by ×{float(a.get('factor', 2.0)):g}",
    "fit": lambda a: f"fit {a.get('view', 'all')} view(s) to the volume",
    "window_preset": lambda a: f"apply the {a.get('preset')} window preset",
    "select_volume": lambda a: f"show volume {a.get('volume_name') or a.get('volume_id')}",
    "set_layout": lambda a: f"switch to the {a.get('layout')} layout",
    "record_point": lambda a: f"record a point at {point(a['ras'])}" if a.get("ras") else "record a point",
    "record_key_slice": lambda a: f"record the current {a.get('view', 'red')} slice as a key slice",
    "probe_value": lambda a: f"read the value at {point(a['ras'])}" if a.get("ras") else "read a value",
}


def action_words(handler: str, args: dict[str, Any]) -> str:
    """The call said in words, every argument that changes what it does included; a handler without its own
    sentence is named with all its arguments."""
    say = SAYINGS.get(handler)
    extra = {k: v for k, v in args.items() if k not in RENDER_ARGS}
    if say is not None:
        try:
            text = say(args)
        except (KeyError, TypeError, ValueError):  # odd arguments: said one by one below
            text = ""
        if text:
            label = args.get("label")
            return f"{text} (label “{label}”)" if label else text
    listed = ", ".join(f"{k} = {v}" for k, v in extra.items())
    return f"{handler.replace('_', ' ')}" + (f": {listed}" if listed else "")
