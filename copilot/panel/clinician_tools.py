"""The clinician's own tools on a slice view (Qt-free; the panes only pass pointer positions and keys): a ruler
whose distance is recorded as the clinician's evidence, zoom about the pointer, pan by dragging, slice keys
(arrows, PageUp/PageDown, Home/End) and window/level by right-drag. Each is an audited handler call (a pan is
two zooms, one undo step)."""

from __future__ import annotations

from typing import Any

import numpy as np

from copilot.engine.geometry import SliceView
from copilot.trace.outcome import CallOutcome

PAGE_SLICES = 10  # PageUp/PageDown move this many slices
KEY_SLICES = {"up": 1, "down": -1, "page_up": PAGE_SLICES, "page_down": -PAGE_SLICES}


class ClinicianTools:
    """Tools bound to a panel model (its audited `act` and its undo history) and the screen's frames."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.session = model.session

    # ----- ruler -----
    def ruler(self, view: str, frame: Any, start: tuple[float, float], end: tuple[float, float],
              label: str = "ruler") -> CallOutcome:  # fmt: skip
        """A distance between two pointer positions of a pane (device pixels), recorded as the clinician's
        evidence (`measure_distance`)."""
        a, b = frame.to_ras(*start), frame.to_ras(*end)
        if a is None or b is None:
            raise ValueError("the ruler needs a slice view")
        args = {"view": view, "ras_a": [round(v, 3) for v in a], "ras_b": [round(v, 3) for v in b], "label": label}
        return self.model.act("measure_distance", args)

    # ----- keys -----
    def key(self, view: str, key: str) -> CallOutcome:
        """up/down: one slice; page_up/page_down: ten; home/end: the first/last slice."""
        if key in KEY_SLICES:
            return self.model.scroll(view, KEY_SLICES[key])
        if key not in ("home", "end"):
            raise ValueError(f"unknown slice key {key!r}")
        span = self.model.act("get_slice_offset_range", {"view": view})
        if not span.ok:
            return span
        offset = span.result["min" if key == "home" else "max"]
        return self.model.act("set_slice_offset", {"view": view, "offset": offset, "size": 64})

    # ----- zoom and pan -----
    def _norm(self, view: str, ras: Any) -> list[float]:
        """Where a RAS point lies on the view's image in the 0–999 coordinates its handlers take."""
        xy = self.session.view_geometry(view, SliceView).ras_to_norm1000(np.asarray(ras, dtype=float))
        return [round(float(v), 4) for v in xy]

    def zoom_at(self, view: str, frame: Any, at: tuple[float, float], factor: float) -> CallOutcome:
        """Zoom a slice view by `factor` (>1 magnifies) keeping the point under the pointer where it is."""
        ras = frame.to_ras(*at)
        args: dict[str, Any] = {"view": view, "factor": float(factor), "size": 64}
        if ras is not None:
            norm = self._norm(view, ras)
            if all(0 <= v <= 999 for v in norm):
                args["center_1000"] = norm
        return self.model.act("zoom", args)

    def pan(self, view: str, frame: Any, start: tuple[float, float], end: tuple[float, float]) -> CallOutcome:
        """Move the picture with the pointer from `start` to `end` (device pixels): the view's centre moves by the
        opposite of the drag, by two zooms about chosen points (out by 2 about the centre, in by 2 about the
        centre less twice the drag), one undo step; a pan that cannot be made leaves the view as it was."""
        a, b = frame.to_ras(*start), frame.to_ras(*end)
        if a is None or b is None:
            raise ValueError("pan needs a slice view")
        drag = np.asarray(b) - np.asarray(a)
        centre = self.session.view_geometry(view, SliceView).center
        history = self.model.history
        with history.gesture() as step:
            out = self.model.act("zoom", {"view": view, "factor": 0.5, "center_1000": self._norm(view, centre),
                                          "size": 64})  # fmt: skip
            if out.ok:
                target = self._norm(view, centre - 2.0 * drag)
                target = [min(max(v, 0.0), 999.0) for v in target]
                out = self.model.act("zoom", {"view": view, "factor": 2.0, "center_1000": target, "size": 64})
        if not out.ok and step.calls:  # half a pan: taken back
            history.undo()
        return out

    # ----- window/level -----
    def window_level_drag(self, dx: float, dy: float) -> CallOutcome:
        """Right-drag: right widens the window, down lowers the level (by the window's width per 200 px)."""
        state = self.session.snapshot()
        vid = state["background_volume"]
        d = state["display"][vid]
        w, lv = float(d["window"]), float(d["level"])
        window = max(1.0, w * (1.0 + dx / 200.0))
        return self.model.window_level(round(window, 3), round(lv - dy / 200.0 * w, 3))
