"""Evidence-capture handlers: checkable records of what the agent looked at and where.

Each record carries both RAS millimetres and voxel IJK of the volume it was taken on, so an
audit can check it against the image the agent saw.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import Field

from copilot.errors import HandlerError
from copilot.tools import guards
from copilot.tools.args import (
    DEFAULT_SIZE,
    BBox1000,
    Label,
    Mm,
    Point1000,
    Size,
    View,
    canonical_view,
    ras_report,
    render_views,
    screen_point,
)
from copilot.tools.radiology import handler
from copilot.tools.registry import HandlerOutput, RadiologyContext

OptRAS = Annotated[list[Mm] | None, Field(min_length=3, max_length=3, description="[R, A, S] in millimetres.")]


def _add(ctx: RadiologyContext, record: dict[str, Any]) -> dict[str, Any]:
    record = {"evidence_id": len(ctx.evidence) + 1, **record}
    ctx.evidence.append(record)
    return record


def _point(
    ctx: RadiologyContext, view: str, ras: list[float] | None, p: list[float] | None, b: list[float] | None
) -> np.ndarray:
    """A RAS point given directly or as a screen point/box on a view (exactly one way)."""
    if ras is not None:
        if p is not None or b is not None:
            raise HandlerError("invalid_arguments", "give ras or a screen point (point_1000/bbox_1000), not both")
        return np.array(ras, dtype=float)
    return ctx.viewer.point_to_ras(view, screen_point(p, b))


@handler(role="evidence_capture")
def bookmark_view(
    ctx: RadiologyContext, view: View = "red", label: Label = "", size: Size = DEFAULT_SIZE
) -> HandlerOutput:
    """Save the current view (its geometry, layers and image) as evidence and return that image."""
    name = canonical_view(view)
    images = render_views(ctx, (name,), size)
    st = ctx.viewer.state()
    rec = _add(
        ctx,
        {
            "kind": "bookmark",
            "label": label,
            "view": name,
            "view_state": st["views"][name],
            "background_volume": st["background_volume"],
            "foreground_volume": st["foreground_volume"],
        },
    )
    return HandlerOutput({"evidence": rec}, images)


@handler(role="evidence_capture")
def record_key_slice(
    ctx: RadiologyContext,
    view: View = "red",
    label: Label = "",
    offset: Annotated[Mm | None, Field(description="Offset in mm; omitted: the view's current offset.")] = None,
) -> HandlerOutput:
    """Record a key slice: the view's RAS axis (S, R or A) and offset in mm, on the active volume."""
    name = canonical_view(view)
    v = ctx.viewer.view(name)
    off = v.offset if offset is None else float(offset)
    ctx.viewer.check_offset(name, off)
    vid = ctx.viewer.resolve_volume()
    vol = ctx.viewer.volume(vid)
    point = v.center + (off - v.offset) * v.axis
    index = vol.ras_to_ijk_point(point)
    rec = _add(
        ctx,
        {
            "kind": "key_slice",
            "label": label,
            "view": name,
            "axis": v.axis_label,
            "offset_mm": round(off, 6),
            "volume": vol.name,
            "volume_id": vid,
            "ijk_at_view_centre": [round(float(x), 6) for x in index],
        },
    )
    result: dict[str, Any] = {"evidence": rec}
    guards.check_source_series(ctx, vid, result)
    guards.check_observed_offset(ctx, v.axis_label, off, result)
    return HandlerOutput(result)


@handler(role="evidence_capture")
def record_point(
    ctx: RadiologyContext,
    ras: OptRAS = None,
    view: View = "red",
    point_1000: Point1000 = None,
    bbox_1000: BBox1000 = None,
    label: Label = "",
) -> HandlerOutput:
    """Record a RAS point (given in mm, or as a 0–999 point/box on a view's last image) with its voxel IJK."""
    name = canonical_view(view)
    point = _point(ctx, name, ras, point_1000, bbox_1000)
    vid = ctx.viewer.resolve_volume()
    report = ras_report(ctx, vid, point)
    if not report["inside_volume"]:
        raise HandlerError("out_of_volume", f"RAS {report['ras']} lies outside {report['volume']}")
    rec = _add(ctx, {"kind": "point", "label": label, **report})
    result: dict[str, Any] = {"evidence": rec}
    guards.check_source_series(ctx, vid, result)
    guards.check_observed_point(ctx, point, result)
    return HandlerOutput(result)


@handler(role="evidence_capture")
def measure_distance(
    ctx: RadiologyContext,
    view: View = "red",
    ras_a: OptRAS = None,
    ras_b: OptRAS = None,
    point_a_1000: Point1000 = None,
    point_b_1000: Point1000 = None,
    label: Label = "",
) -> HandlerOutput:
    """Measure the distance in mm between two points (RAS, or 0–999 points on a view) and record it."""
    name = canonical_view(view)
    a = _point(ctx, name, ras_a, point_a_1000, None)
    b = _point(ctx, name, ras_b, point_b_1000, None)
    vid = ctx.viewer.resolve_volume()
    rec = _add(
        ctx,
        {
            "kind": "distance",
            "label": label,
            "distance_mm": round(float(np.linalg.norm(a - b)), 6),
            "a": ras_report(ctx, vid, a),
            "b": ras_report(ctx, vid, b),
        },
    )
    return HandlerOutput({"evidence": rec})
