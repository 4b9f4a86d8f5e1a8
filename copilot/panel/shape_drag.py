"""The clinician's shape tools drawn with the mouse (Qt-free; the panes pass pointer positions): a bidirectional
measurement is two drags — the long axis, then the short axis, laid exactly perpendicular to the long one in the
view's plane, through the long axis at the point nearest the second drag's middle, as long as that drag across it —
and an ellipse ROI is one drag across its bounding box. Each completed shape is an audited evidence call."""

from __future__ import annotations

from typing import Any

import numpy as np

from copilot.engine.geometry import SliceView
from copilot.trace.outcome import CallOutcome

SHAPES = ("bidirectional", "ellipse")


class ShapeDrags:
    """The shape tools of one panel model; `pending` is a bidirectional's long axis waiting for its short one."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.pending: tuple[str, np.ndarray, np.ndarray] | None = None

    def _ends(self, frame: Any, start: tuple[float, float], end: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        a, b = frame.to_ras(*start), frame.to_ras(*end)
        if a is None or b is None:
            raise ValueError("the shape tools need a slice view")
        return np.asarray(a, dtype=float), np.asarray(b, dtype=float)

    def drag(self, tool: str, view: str, frame: Any, start: tuple[float, float], end: tuple[float, float],
             label: str = "") -> CallOutcome | None:  # fmt: skip
        """One drag of `tool` on `view`: the recorded call, or None while a bidirectional waits for its short axis."""
        if tool not in SHAPES:
            raise ValueError(f"unknown shape tool {tool!r}")
        a, b = self._ends(frame, start, end)
        geometry = self.model.session.view_geometry(view, SliceView)
        if tool == "ellipse":
            self.pending = None
            d, right, up = b - a, geometry.matrix[:, 0], geometry.matrix[:, 1]
            args = {"view": view, "center_ras": [round(float(v), 3) for v in (a + b) / 2],
                    "radius_x_mm": max(round(abs(float(d @ right)) / 2, 3), 0.001),
                    "radius_y_mm": max(round(abs(float(d @ up)) / 2, 3), 0.001),
                    "label": label or "ellipse"}  # fmt: skip
            return self.model.act("measure_ellipse", args)  # type: ignore[no-any-return]
        if self.pending is None or self.pending[0] != view:
            self.pending = (view, a, b)
            return None
        _, la, lb = self.pending
        self.pending = None
        axis = (lb - la) / np.linalg.norm(lb - la)
        across = np.cross(geometry.matrix[:, 2], axis)
        across /= np.linalg.norm(across)
        t = float(np.clip(((a + b) / 2 - la) @ axis, 0.0, float(np.linalg.norm(lb - la))))
        centre, half = la + t * axis, abs(float((b - a) @ across)) / 2
        args = {"long_a": _mm(la), "long_b": _mm(lb), "short_a": _mm(centre - half * across),
                "short_b": _mm(centre + half * across), "label": label or "bidirectional"}  # fmt: skip
        return self.model.act("measure_bidirectional", args)  # type: ignore[no-any-return]


def _mm(p: np.ndarray) -> list[float]:
    return [round(float(v), 3) for v in p]
