"""What a trace showed the agent: the radiology planes and slide fields of the images handler calls returned; and the
events of an episode's trace, read once for every measure and page drawn from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from copilot.trace.recorder import TRACE_FILE

TOL_MM = 0.51  # a cited offset matches a displayed one within half a millimetre (corner overlays show 0.1 mm)
RAS_INDEX = {"R": 0, "A": 1, "S": 2}


def shown_planes(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The radiology planes an event's images showed the agent: view, axis, offset, centre, FOV, volume."""
    state = event.get("state") or {}
    views = state.get("views") or {}
    result = event.get("result") or {}
    out = []
    images = event.get("images", [])
    frames = list(result.get("frame_offsets") or []) if event["handler"] == "scroll" else []
    for n, im in enumerate(images):
        name = im.get("view")
        if name not in views:
            continue
        v = views[name]
        offsets = [v["offset"]]
        if frames and result.get("view") == name:  # keyframes: one image per offset; a cine: every offset
            offsets = [frames[n]] if len(images) == len(frames) else frames
        for off in offsets:
            out.append(
                {
                    "view": name,
                    "axis": v["axis"],
                    "offset": float(off),
                    "center": v["center_ras"],
                    "fov": v["fov_mm"],
                    "volume": state.get("background_volume"),
                    "volume_name": state.get("active_volume_name"),
                    "seq": event["seq"],
                }
            )
    return out


def shown_fields(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The slide fields an event's screenshot showed: visible region (level-0 px) and magnification."""
    state = event.get("state") or {}
    if not event.get("images") or "visible_region" not in state:
        return []
    return [{"region": state["visible_region"], "magnification": state.get("magnification"), "seq": event["seq"]}]


def in_plane_axes(axis: str) -> tuple[str, str]:
    return {"S": ("R", "A"), "R": ("A", "S"), "A": ("R", "S")}[axis]


def point_on_plane(ras: list[float], plane: dict[str, Any]) -> bool:
    """A RAS point lies on a shown plane (within tolerance) and inside its field of view."""
    axis = plane["axis"]
    if abs(ras[RAS_INDEX[axis]] - plane["offset"]) > TOL_MM:
        return False
    for n, a in enumerate(in_plane_axes(axis)):
        half = plane["fov"][n] / 2.0 + TOL_MM
        if abs(ras[RAS_INDEX[a]] - plane["center"][RAS_INDEX[a]]) > half:
            return False
    return True


def recorded_events(trace_dir: Path) -> list[dict[str, Any]] | None:
    """The events of the trace in an episode folder as recorded (None without one); its integrity is `medcopilot
    replay`'s business, not a page's or a measure's."""
    path = Path(trace_dir) / TRACE_FILE
    if not path.is_file():
        return None
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]
