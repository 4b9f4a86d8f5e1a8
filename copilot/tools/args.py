"""Argument types shared by handler declarations, and small helpers the handlers share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from copilot.cases.paths import case_path
from copilot.errors import HandlerError
from copilot.tools.guards import note_rendered
from copilot.tools.registry import HandlerContext, ImageOut, RadiologyContext

ViewLiteral = Literal["red", "yellow", "green", "axial", "sagittal", "coronal"]
VIEW_ALIASES = {"axial": "red", "sagittal": "yellow", "coronal": "green"}

View = Annotated[ViewLiteral, Field(description="Slice view: red (axial), yellow (sagittal) or green (coronal).")]
ViewOrAll = Annotated[
    ViewLiteral | Literal["all"] | None,
    Field(
        description="Slice view to return (red/axial, yellow/sagittal, green/coronal), 'all', or "
        "omitted for the views of the current layout."
    ),
]
Size = Annotated[int, Field(ge=64, le=2048, description="Side of each returned square image, in pixels.")]
Coord1000 = Annotated[float, Field(ge=0, le=999)]
Point1000 = Annotated[
    list[Coord1000] | None,
    Field(min_length=2, max_length=2, description="[x, y] on the last image of the view, 0–999 from the top-left."),
]
BBox1000 = Annotated[
    list[Coord1000] | None,
    Field(
        min_length=4,
        max_length=4,
        description="[x0, y0, x1, y1] box on the last image of the view, 0–999; its centre is used.",
    ),
]
MAX_MM = 1e7  # 10 km: any coordinate beyond is a mistake, and sums of squares stay finite
Mm = Annotated[float, Field(ge=-MAX_MM, le=MAX_MM)]
MAX_OFFSET_MM = 1e12  # slice offsets: beyond the volume the viewer refuses by name (offset_out_of_range)
RAS = Annotated[list[Mm], Field(min_length=3, max_length=3, description="[R, A, S] in millimetres.")]
VolumeId = Annotated[str | None, Field(max_length=256, description="Volume node id from the scene inventory.")]
VolumeName = Annotated[str | None, Field(max_length=256, description="Volume name from the scene inventory.")]
Label = Annotated[str, Field(max_length=200, description="Short label stored with the evidence.")]

DEFAULT_SIZE = 512


def canonical_view(view: str) -> str:
    return VIEW_ALIASES.get(view, view)


def views_for(ctx: RadiologyContext, view: str | None) -> tuple[str, ...]:
    """Views to return: one view, all three, or those of the current layout."""
    if view is None:
        return tuple(ctx.viewer.layout_views())
    if view == "all":
        return ("red", "yellow", "green")
    return (canonical_view(view),)


def render_views(ctx: RadiologyContext, views: tuple[str, ...], size: int) -> list[ImageOut]:
    """Render views at a square size; each becomes an ImageOut labelled with its offset."""
    out = []
    for name in views:
        image = ctx.viewer.render(name, (size, size))
        v = ctx.viewer.view(name)
        note_rendered(ctx, name)
        out.append(ImageOut(view=name, image=image, label=f"{v.axis_label}: {v.offset:.1f}mm"))
    return out


def screen_point(point_1000: list[float] | None, bbox_1000: list[float] | None) -> tuple[float, float]:
    """The one screen point given: a point or a box centre; refuses both or neither."""
    if (point_1000 is None) == (bbox_1000 is None):
        raise HandlerError("invalid_arguments", "give exactly one of point_1000 or bbox_1000")
    if point_1000 is not None:
        return (float(point_1000[0]), float(point_1000[1]))
    x0, y0, x1, y1 = bbox_1000  # type: ignore[misc]
    if x1 < x0 or y1 < y0:
        raise HandlerError("invalid_arguments", "bbox_1000 must be [x0, y0, x1, y1] with x0 <= x1 and y0 <= y1")
    return ((x0 + x1) / 2.0, (y0 + y1) / 2.0)


def volume_ref(ctx: RadiologyContext, volume_id: str | None, volume_name: str | None) -> str:
    """Resolve an optional id/name pair (ids win only when they agree with the name)."""
    vid = ctx.viewer.resolve_volume(volume_id=volume_id) if volume_id is not None else None
    if volume_name is not None:
        by_name = ctx.viewer.resolve_volume(volume_name=volume_name)
        if vid is not None and vid != by_name:
            raise HandlerError("invalid_arguments", f"volume_id {volume_id!r} and volume_name {volume_name!r} differ")
        vid = by_name
    return vid if vid is not None else ctx.viewer.resolve_volume()


def ref_to_volume(ctx: RadiologyContext, ref: str) -> str:
    """A volume reference that may be an id or a name."""
    if ref in ctx.viewer.volume_ids():
        return ref
    return ctx.viewer.resolve_volume(volume_name=ref)


def ras_report(ctx: RadiologyContext, vid: str, ras: np.ndarray) -> dict[str, Any]:
    """RAS point with the nearest voxel of a volume, for audit."""
    vol = ctx.viewer.volume(vid)
    ijk = vol.ras_to_ijk_point(ras)
    nearest = np.rint(ijk).astype(int)
    return {
        "ras": [round(float(x), 6) for x in ras],
        "ijk": [int(x) for x in nearest],
        "ijk_continuous": [round(float(x), 6) for x in ijk],
        "inside_volume": vol.nearest_voxel(ras) is not None,
        "volume": vol.name,
        "volume_id": vid,
    }


def resolve_case_path(ctx: HandlerContext[Any], path: str) -> Path:
    """A case input path for a handler, by the one resolver (`copilot.cases.paths.case_path`)."""
    return case_path(ctx.case_root, path)
