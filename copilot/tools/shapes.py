"""The clinician's measurement tools as evidence handlers, the same for a mouse in a viewer and for a model: a
bidirectional measurement (long axis and its perpendicular short axis), an ellipse or circle ROI on a view with
the statistics of the voxels it covers (HU for CT, SUVbw too for PET where its tags allow), and an angle.

Each records checkable RAS coordinates with the numbers, so the desktop can draw it and a report can store it
(`copilot.tools.sr_shapes`). An ellipse lies in the plane through its centre parallel to the view, its radii along
the view's right and up directions; the voxels counted are those whose centres lie inside it in the voxel layer
nearest its plane (within half a voxel of it).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from copilot.errors import HandlerError
from copilot.tools.args import RAS, Label, View, canonical_view, ras_report
from copilot.tools.measure import _grid_points, suv_terms, units_of
from copilot.tools.radiology import handler
from copilot.tools.registry import HandlerOutput, RadiologyContext

PERPENDICULAR_DEG = 5.0  # how far from a right angle a short axis may be drawn
RadiusMm = Annotated[float, Field(gt=0, le=150, description="Radius in millimetres.")]


def _add(ctx: RadiologyContext, record: dict[str, Any]) -> dict[str, Any]:
    record = {"evidence_id": len(ctx.evidence) + 1, **record}
    ctx.evidence.append(record)
    return record


def _angle_deg(u: np.ndarray, v: np.ndarray) -> float:
    cos = float(np.clip(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)), -1.0, 1.0))
    return math.degrees(math.acos(cos))


@handler(role="evidence_capture")
def measure_bidirectional(
    ctx: RadiologyContext, long_a: RAS, long_b: RAS, short_a: RAS, short_b: RAS, label: Label = ""
) -> HandlerOutput:
    """Record a bidirectional measurement: the long axis and its perpendicular short axis (RAS end points, mm), as
    RECIST and RANO measure a lesion."""
    la, lb, sa, sb = (np.asarray(p, dtype=float) for p in (long_a, long_b, short_a, short_b))
    long_mm, short_mm = float(np.linalg.norm(lb - la)), float(np.linalg.norm(sb - sa))
    if long_mm == 0 or short_mm == 0:
        raise HandlerError("invalid_arguments", "each axis needs two different end points")
    if short_mm > long_mm:
        raise HandlerError("invalid_arguments", f"the short axis ({short_mm:.1f} mm) is longer than the long axis")
    off = abs(90.0 - _angle_deg(lb - la, sb - sa))
    if off > PERPENDICULAR_DEG:
        raise HandlerError("invalid_arguments", f"the short axis is {off:.1f}° off perpendicular to the long axis "
                           f"(at most {PERPENDICULAR_DEG:g}°)")  # fmt: skip
    vid = ctx.viewer.resolve_volume()
    rec = _add(ctx, {
        "kind": "bidirectional", "label": label, "long_mm": round(long_mm, 6), "short_mm": round(short_mm, 6),
        "long": {"a": ras_report(ctx, vid, la), "b": ras_report(ctx, vid, lb)},
        "short": {"a": ras_report(ctx, vid, sa), "b": ras_report(ctx, vid, sb)}, "volume_id": vid,
    })  # fmt: skip
    return HandlerOutput({"evidence": rec})


@handler(role="evidence_capture")
def measure_angle(ctx: RadiologyContext, ras_a: RAS, vertex: RAS, ras_b: RAS, label: Label = "") -> HandlerOutput:
    """Record the angle in degrees at `vertex` between the lines to `ras_a` and `ras_b` (RAS, mm)."""
    a, v, b = (np.asarray(p, dtype=float) for p in (ras_a, vertex, ras_b))
    if not np.linalg.norm(a - v) or not np.linalg.norm(b - v):
        raise HandlerError("invalid_arguments", "both arms need an end point other than the vertex")
    vid = ctx.viewer.resolve_volume()
    rec = _add(ctx, {"kind": "angle", "label": label, "angle_deg": round(_angle_deg(a - v, b - v), 6),
                     "points": [ras_report(ctx, vid, p) for p in (a, v, b)], "volume_id": vid})  # fmt: skip
    return HandlerOutput({"evidence": rec})


def ellipse_voxels(vol: Any, view: Any, centre: np.ndarray, rx: float, ry: float) -> np.ndarray:
    """The values of the voxels whose centres lie inside the ellipse and within half a voxel of its plane."""
    right, up, normal = view.matrix[:, 0], view.matrix[:, 1], view.matrix[:, 2]
    step = 1.0 / float(np.max(np.abs(vol.ras_to_ijk[:3, :3] @ normal)))  # one voxel along the normal, in mm
    reach = rx * np.abs(right) + ry * np.abs(up) + step / 2 * np.abs(normal)
    region, pts = _grid_points(vol, centre - reach, centre + reach)
    d = pts - centre
    inside = ((d @ right) / rx) ** 2 + ((d @ up) / ry) ** 2 <= 1.0
    depth = np.abs(d @ normal)
    if inside.any():  # the voxel layer nearest the plane (both, where it lies half-way between two)
        inside &= depth <= min(float(depth[inside].min()), step / 2) + 1e-6
    return np.asarray(np.asarray(vol.data[region], dtype=np.float64)[inside])


@handler(role="evidence_capture")
def measure_ellipse(
    ctx: RadiologyContext, center_ras: RAS, radius_x_mm: RadiusMm, radius_y_mm: RadiusMm, view: View = "red",
    label: Label = "",
) -> HandlerOutput:
    """Record an ellipse (a circle when both radii are equal) in the plane through `center_ras` parallel to a view,
    radii along the view's right and up, with the area (mm²) and the mean, SD, min and max of the voxels inside it."""
    name = canonical_view(view)
    v = ctx.viewer.view(name)
    vid = ctx.viewer.resolve_volume()
    vol = ctx.viewer.volume(vid)
    c = np.asarray(center_ras, dtype=float)
    values = ellipse_voxels(vol, v, c, float(radius_x_mm), float(radius_y_mm))
    if values.size == 0:
        raise HandlerError("empty_region", "the ellipse holds no voxel of the volume (outside it, or too small)")
    stats = {"mean": float(values.mean()), "sd": float(values.std(ddof=1)) if values.size > 1 else 0.0,
             "min": float(values.min()), "max": float(values.max())}  # fmt: skip
    right, up = v.matrix[:, 0], v.matrix[:, 1]
    ends = [c - radius_x_mm * right, c + radius_x_mm * right, c - radius_y_mm * up, c + radius_y_mm * up]
    rec: dict[str, Any] = {
        "kind": "ellipse", "label": label, "view": name, "center_ras": [round(float(x), 6) for x in c],
        "radius_x_mm": float(radius_x_mm), "radius_y_mm": float(radius_y_mm),
        "axes_ras": [[round(float(x), 6) for x in p] for p in ends],
        "area_mm2": round(math.pi * radius_x_mm * radius_y_mm, 4), "voxels": int(values.size),
        "volume_id": vid, "volume": vol.name, "units": units_of(vol),
        "values": {k: round(x, 4) for k, x in stats.items()},
    }  # fmt: skip
    suv = suv_terms(vol, stats)
    if suv is not None:
        rec["suv"] = suv
    return HandlerOutput({"evidence": _add(ctx, rec)})
