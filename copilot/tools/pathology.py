"""Pathology (QuPath) handlers: the names and arguments of Table 10 and Appendix B of the MedFlow paper."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import Field

from copilot.engine.slide.viewer import IMAGE_TYPES, ZOOM_STEP
from copilot.engine.volume.render import encode_jpeg
from copilot.errors import HandlerError
from copilot.tools import slide_guards
from copilot.tools.args import Label, resolve_case_path
from copilot.tools.qupath_summary import direct_state_summary, gui_state_summary
from copilot.tools.registry import HandlerOutput, ImageOut, Registry, SlideContext

PATHOLOGY = Registry("pathology")
handler = PATHOLOGY.handler
MAX_SLEEP_S = 5.0

Coord = Annotated[
    float | None, Field(ge=0, le=999, description="0–999 on the current screenshot, from the left (x) or the top (y).")
]
ImageType = Literal[IMAGE_TYPES]  # type: ignore[valid-type]


def _screenshot(ctx: SlideContext, label: str = "viewer") -> ImageOut:
    image = ctx.viewer.render()
    slide_guards.note_shown(ctx)
    if getattr(ctx.viewer, "screenshot_format", "png") == "jpeg":
        return ImageOut(view="viewer", data=encode_jpeg(image), mime="image/jpeg", label=label)
    return ImageOut(view="viewer", image=image, label=label)


def _with_state(ctx: SlideContext, result: dict[str, Any], image: bool = True) -> HandlerOutput:
    """Result + the two per-round summaries of Appendix H.2 + the current screenshot."""
    result = {
        **result,
        "direct_state_summary": direct_state_summary(ctx.viewer),
        "gui_state_summary": gui_state_summary(ctx.viewer),
    }
    images = [_screenshot(ctx)] if image and ctx.viewer.has_image() else []
    return HandlerOutput(result, images)


def _point(x: float | None, y: float | None) -> tuple[float, float] | None:
    if (x is None) != (y is None):
        raise HandlerError("invalid_arguments", "give both x and y (0–999), or neither")
    return None if x is None else (float(x), float(y))  # type: ignore[arg-type]


@handler(role="viewer_control")
def load_case(
    ctx: SlideContext,
    path: Annotated[
        str | None,
        Field(max_length=1024, description="Slide path relative to the case folder; omitted: the case's own slide."),
    ] = None,
) -> HandlerOutput:
    """Load (or reset) the case's whole-slide image in the viewer, fitted to the window."""
    rel = path if path is not None else ctx.case_inputs.get("slide")
    if not rel:
        raise HandlerError("invalid_arguments", "this case lists no slide; give path")
    ctx.viewer.open(resolve_case_path(ctx, rel), ctx.case_inputs.get("image_type", "BRIGHTFIELD_H_E"))
    ctx.viewer.last_action = "load_case"
    return _with_state(ctx, {"loaded": rel})


@handler(role="viewer_control")
def load_image(
    ctx: SlideContext,
    path: Annotated[str, Field(max_length=1024, description="Image path relative to the case folder.")],
) -> HandlerOutput:
    """Open another image of the case folder in the viewer."""
    ctx.viewer.open(resolve_case_path(ctx, path), "UNSET")
    ctx.viewer.last_action = "load_image"
    return _with_state(ctx, {"loaded": path})


@handler(role="viewer_control")
def set_image_type(
    ctx: SlideContext,
    image_type: Annotated[ImageType, Field(description="QuPath image type, e.g. BRIGHTFIELD_H_E.")],
) -> HandlerOutput:
    """Set the image type of the open image (QuPath's ImageData.ImageType)."""
    ctx.viewer.set_image_type(image_type)
    ctx.viewer.last_action = "set_image_type"
    return _with_state(ctx, {"image_type": image_type}, image=False)


@handler(role="viewer_control", hints={"idempotentHint": False})  # a move relative to where it is
def zoom(
    ctx: SlideContext,
    direction: Annotated[
        Literal["in", "out"] | None, Field(description="in or out; required for factor and steps.")
    ] = None,
    amount: Annotated[
        float,
        Field(
            gt=0,
            le=10000,
            description="Target magnification (unit magnification), zoom "
            "factor (unit factor) or number of steps (unit steps).",
        ),
    ] = 2.0,
    unit: Annotated[Literal["magnification", "factor", "steps"], Field(description="How amount is meant.")] = "factor",
    x: Coord = None,
    y: Coord = None,
) -> HandlerOutput:
    """Change the zoom by absolute magnification, relative factor or QuPath steps; optionally re-centre on (x, y)."""
    viewer = ctx.viewer
    viewer.require()
    centre = _point(x, y)
    vp = viewer.viewport
    if unit == "magnification":
        full = viewer.full_magnification()
        if full is None:
            raise HandlerError("unknown_magnification", "this slide has no pixel size: use unit factor or steps")
        target = full / amount
        if direction is not None and (target < vp.downsample) != (direction == "in"):
            raise HandlerError(
                "invalid_arguments", f"{amount}x is not a zoom {direction} from the current {full / vp.downsample:.2f}x"
            )
    else:
        if direction is None:
            raise HandlerError("invalid_arguments", f"direction (in or out) is required with unit {unit}")
        if unit == "steps" and (amount != int(amount) or amount > 1000):
            raise HandlerError("invalid_arguments", "steps must be a whole number up to 1000")
        if unit == "factor" and amount < 1:
            raise HandlerError("invalid_arguments", "factor must be ≥ 1; use direction to zoom out")
        factor = amount if unit == "factor" else ZOOM_STEP**amount
        target = vp.downsample / factor if direction == "in" else vp.downsample * factor
    if centre is not None:
        viewer.set_centre(*viewer.point_to_level0(*centre))
    clamped = viewer.set_downsample(target)
    viewer.last_action = f"zoom {direction or 'to'} {amount:g} ({unit})"
    return _with_state(
        ctx, {"downsample": viewer.viewport.downsample, "magnification": viewer.magnification(), "clamped": clamped}
    )


@handler(role="viewer_control", hints={"idempotentHint": False})  # a move relative to where it is
def pan(
    ctx: SlideContext,
    direction: Annotated[
        Literal["left", "right", "up", "down"] | None,
        Field(description="Direction the view moves over the slide; omitted when re-centring on (x, y)."),
    ] = None,
    amount: Annotated[float, Field(gt=0, le=1e6, description="Distance in the given unit.")] = 0.5,
    unit: Annotated[
        Literal["fraction", "screen_pixels", "microns", "wsi_pixels"],
        Field(description="fraction of the viewer size, screen pixels, micrometres or level-0 pixels."),
    ] = "fraction",
    x: Coord = None,
    y: Coord = None,
) -> HandlerOutput:
    """Pan the viewer by an amount, or re-centre it on a screenshot point (x, y); returns the updated view."""
    viewer = ctx.viewer
    viewer.require()
    centre = _point(x, y)
    vp = viewer.viewport
    if centre is not None:
        if direction is not None:
            raise HandlerError("invalid_arguments", "give a direction or a point (x, y), not both")
        clamped = viewer.set_centre(*viewer.point_to_level0(*centre))
        viewer.last_action = f"pan to ({centre[0]:g}, {centre[1]:g})"
    else:
        if direction is None:
            raise HandlerError("invalid_arguments", "give a direction or a point (x, y)")
        horizontal = direction in ("left", "right")
        if unit == "fraction":
            dist = amount * (vp.width if horizontal else vp.height) * vp.downsample
        elif unit == "screen_pixels":
            dist = amount * vp.downsample
        elif unit == "microns":
            mpp = viewer.require().info.mpp
            if mpp is None:
                raise HandlerError("unknown_pixel_size", "this slide has no pixel size: use another unit")
            dist = amount / (mpp[0] if horizontal else mpp[1])
        else:
            dist = amount
        sign = 1.0 if direction in ("right", "down") else -1.0
        dx, dy = (sign * dist, 0.0) if horizontal else (0.0, sign * dist)
        clamped = viewer.set_centre(vp.cx + dx, vp.cy + dy)
        viewer.last_action = f"pan {direction} {amount:g} {unit}"
    return _with_state(ctx, {"center": [viewer.viewport.cx, viewer.viewport.cy], "clamped": clamped})


@handler(role="viewer_control")
def focus_qupath(ctx: SlideContext) -> HandlerOutput:
    """Bring the viewer to the foreground and return the current viewer state."""
    ctx.viewer.last_action = "focus"
    return _with_state(ctx, {"focused": True})


@handler(role="viewer_control")
def get_qupath_state(ctx: SlideContext) -> HandlerOutput:
    """Return the direct QuPath state summary and the rule-based GUI state summary (no screenshot)."""
    return _with_state(ctx, {"state": ctx.viewer.state()}, image=False)


@handler(role="evidence_capture")
def capture_viewer(ctx: SlideContext, label: Label = "capture") -> HandlerOutput:
    """Capture the current viewer as a labelled screenshot artifact."""
    ctx.viewer.require()
    st = ctx.viewer.state()
    rec = {
        "evidence_id": len(ctx.evidence) + 1,
        "kind": "capture",
        "label": label,
        "center": st["center"],
        "downsample": st["downsample"],
        "visible_region": st["visible_region"],
    }
    ctx.evidence.append(rec)
    ctx.viewer.last_action = f"capture '{label}'"
    box = ctx.viewer.overview_box()
    return HandlerOutput(
        {"evidence": rec, "overview_box": list(box) if box else None}, [_screenshot(ctx, label)]
    )


@handler(role="viewer_control")
def viewer_point_to_wsi_coordinate(
    ctx: SlideContext,
    x: Annotated[float, Field(ge=0, le=999, description="0–999 from the left of the current screenshot.")],
    y: Annotated[float, Field(ge=0, le=999, description="0–999 from the top of the current screenshot.")],
) -> HandlerOutput:
    """Convert a 0–999 point on the current screenshot to full-resolution (level-0) WSI pixel coordinates."""
    viewer = ctx.viewer
    slide = viewer.require()
    wx, wy = viewer.point_to_level0(x, y)
    w, h = slide.info.dimensions
    vp = viewer.viewport
    sx, sy = x / 1000.0 * vp.width, y / 1000.0 * vp.height
    box = viewer.overview_box()
    on_overview = box is not None and box[0] <= sx <= box[2] and box[1] <= sy <= box[3]
    result = {
        "x": round(wx, 2),
        "y": round(wy, 2),
        "inside_image": 0 <= wx < w and 0 <= wy < h,
        "on_overview_thumbnail": on_overview,
        "downsample": vp.downsample,
    }
    slide_guards.check_observed(ctx, (wx, wy), result)
    return HandlerOutput(result)


@handler(role="evidence_capture")
def record_view_evidence(ctx: SlideContext, label: Label = "", x: Coord = None, y: Coord = None) -> HandlerOutput:
    """Record the current view (and optionally a 0–999 point on it, converted to level-0 pixels) as evidence."""
    viewer = ctx.viewer
    viewer.require()
    pt = _point(x, y)
    st = viewer.state()
    rec: dict[str, Any] = {
        "evidence_id": len(ctx.evidence) + 1,
        "kind": "view",
        "label": label,
        "center": st["center"],
        "downsample": st["downsample"],
        "magnification": st["magnification"],
        "visible_region": st["visible_region"],
    }
    level0 = None
    if pt is not None:
        level0 = viewer.point_to_level0(*pt)
        rec["point"] = {"x": round(level0[0], 2), "y": round(level0[1], 2), "point_1000": list(pt)}
    ctx.evidence.append(rec)
    result: dict[str, Any] = {"evidence": rec}
    slide_guards.check_observed(ctx, level0, result)
    slide_guards.check_magnification(ctx, result)
    return HandlerOutput(result)


@handler(role="viewer_control")
def sleep(
    ctx: SlideContext,
    seconds: Annotated[float, Field(ge=0, le=MAX_SLEEP_S, description="Seconds to wait (at most 5).")] = 1.0,
) -> HandlerOutput:
    """Wait for the viewer to settle, then return its state."""
    time.sleep(seconds)
    return _with_state(ctx, {"slept_s": seconds}, image=False)


@handler(role="viewer_control")
def close(ctx: SlideContext) -> HandlerOutput:
    """Close the open image (load_case opens it again)."""
    ctx.viewer.require()
    ctx.viewer.close()
    ctx.viewer.last_action = "close"
    return _with_state(ctx, {"closed": True}, image=False)


@handler(role="viewer_control")
def center_on_wsi_coordinate(
    ctx: SlideContext,
    x: Annotated[float, Field(ge=0, le=1e7, description="Level-0 x in pixels.")],
    y: Annotated[float, Field(ge=0, le=1e7, description="Level-0 y in pixels.")],
) -> HandlerOutput:
    """Centre the viewer on full-resolution (level-0) slide coordinates, e.g. to revisit recorded evidence."""
    ctx.viewer.require()
    clamped = ctx.viewer.set_centre(x, y)
    ctx.viewer.last_action = f"centre on ({x:.0f}, {y:.0f})"
    return _with_state(ctx, {"center": [ctx.viewer.viewport.cx, ctx.viewer.viewport.cy], "clamped": clamped})
