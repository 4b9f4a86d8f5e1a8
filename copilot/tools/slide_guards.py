"""Pathology workflow guards: warnings in a slide handler's result, like the radiology ones in `guards.py`.

- `unobserved_evidence`: recording a view, or converting a point, that lies outside every viewport a returned
  screenshot showed in the episode at a comparable resolution (downsample at most `RESOLUTION_FACTOR` times
  the current one: a region seen only in a low-power overview was not looked at for a high-power citation);
- `low_magnification_evidence`: recording evidence below the magnification that localisation needs
  (`MIN_EVIDENCE_MAGNIFICATION`, or the case's `inputs.min_evidence_magnification`); slides without a known
  magnification never warn;
- `stale_view`: recording or converting while the viewport differs from the one the last screenshot showed
  (the view moved, e.g. in the host's own window, after the model last saw it).

The guards only read the viewer's state and remember what was shown in `ctx.memo`; they never refuse a call.
"""

from __future__ import annotations

from typing import Any

from copilot.tools.guards import warn
from copilot.tools.registry import SlideContext

MIN_EVIDENCE_MAGNIFICATION = 5.0  # PathAgentBench's lowest level (< 5×, read as 2.5×) is too coarse to localise
MAX_VIEWS = 4000
RESOLUTION_FACTOR = 2.0
TOL_PX = 0.5  # level-0 pixels: rounding of the reported visible region


def _view_of(state: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a shown viewport: image, visible region (level-0), downsample and window size."""
    return (
        state.get("image"),
        tuple(state.get("visible_region") or ()),
        state.get("downsample"),
        tuple(state.get("viewer_size") or ()),
    )


def note_shown(ctx: SlideContext) -> None:
    """Remember the viewport a screenshot returned to the model showed."""
    st = ctx.viewer.state()
    if not st.get("image_open"):
        return
    views = ctx.memo.setdefault("slide_views", [])
    views.append(_view_of(st))
    del views[:-MAX_VIEWS]


def _inside(view: tuple[Any, ...], st: dict[str, Any], x: float, y: float) -> bool:
    """The point lay in this shown viewport of the same image, seen at a comparable resolution."""
    x0, y0, x1, y1 = view[1]
    fine = float(view[2]) <= RESOLUTION_FACTOR * float(st["downsample"]) * (1 + 1e-9)
    return bool(
        view[0] == st.get("image") and fine and x0 - TOL_PX <= x <= x1 + TOL_PX and y0 - TOL_PX <= y <= y1 + TOL_PX
    )


def check_observed(ctx: SlideContext, point: tuple[float, float] | None, result: dict[str, Any]) -> None:
    """Warn when the level-0 point (or, without one, the view's centre) was in no shown viewport, and when
    the current viewport is not the one the last screenshot showed."""
    st = ctx.viewer.state()
    views = ctx.memo.get("slide_views", [])
    x, y = point if point is not None else (float(st["center"][0]), float(st["center"][1]))
    if not any(_inside(v, st, x, y) for v in views):
        what = f"level-0 point ({x:.0f}, {y:.0f})" if point is not None else f"view centred on ({x:.0f}, {y:.0f})"
        warn(
            result,
            "unobserved_evidence",
            f"the {what} lies outside every viewport a screenshot has shown so far at this resolution: "
            "look at it before citing it.",
        )
    if views and views[-1] != _view_of(st):
        warn(
            result,
            "stale_view",
            "the viewport changed since the last screenshot you were shown: take a new one (capture_viewer or "
            "focus_qupath) before recording or converting points.",
        )


def min_magnification(ctx: SlideContext) -> float:
    value = ctx.case_inputs.get("min_evidence_magnification")
    return float(value) if value is not None else MIN_EVIDENCE_MAGNIFICATION


def check_magnification(ctx: SlideContext, result: dict[str, Any]) -> None:
    """Warn when evidence is recorded below the magnification localisation needs (unknown: no warning)."""
    mag = ctx.viewer.state().get("magnification")
    need = min_magnification(ctx)
    if mag is not None and float(mag) < need:
        warn(
            result,
            "low_magnification_evidence",
            f"this evidence is recorded at {float(mag):.2f}×, below the {need:g}× needed to localise a finding: "
            f"zoom in (zoom with unit magnification, amount ≥ {need:g}) before recording.",
        )
