"""Renders that leave the views as they are: the rules every viewer applies to a `Peek`.

A host (the desktop panes, the `/slicer` subset, the evidence report) asks for images of views moved or
re-oriented only for that image. The session saves and restores the viewer's state around the request;
the viewer follows these rules to draw it, so both radiology backends and both slide viewers answer alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from copilot.errors import HandlerError


@dataclass(frozen=True)
class Peek:
    """A render that leaves the views as they are: a view re-oriented, moved to an offset (or a fraction of its
    range), or the scene centred on a RAS point or a level-0 slide point, only for this image."""

    views: tuple[str, ...] = ()  # radiology: () = the layout's views; pathology: ignored (one viewer)
    size: tuple[int, int] = (256, 256)
    orientation: str | None = None
    offset: float | None = None
    scroll_to: float | None = None
    ras: tuple[float, float, float] | None = None
    wsi_point: tuple[float, float] | None = None
    background: str | None = None  # radiology: this volume alone as the background (e.g. a prior study beside)
    fill: bool = False  # pathology: render at `size`, the agent's field scaled to fit it (a host's pane)


def peek_volumes(viewer: Any, r: Peek) -> dict[str, Image.Image]:
    """A radiology viewer's images for `r` (the caller restores the state afterwards); {} without a volume."""
    if not viewer.volume_ids():
        return {}
    views = r.views or tuple(viewer.layout_views())
    if r.background is not None:
        viewer.set_fusion(viewer.resolve_volume(volume_id=r.background), None, 0.0)
    if r.ras is not None:
        viewer.jump(np.asarray(r.ras, dtype=float))
    for name in views:
        if r.orientation is not None and r.orientation != viewer.view(name).orientation:
            viewer.set_orientation(name, r.orientation)
        offset = r.offset
        if r.scroll_to is not None:
            if not 0.0 <= r.scroll_to <= 1.0:
                raise HandlerError("invalid_arguments", "scrollTo must lie in [0, 1]")
            lo, hi = viewer.slice_offset_range(name)
            offset = lo + r.scroll_to * (hi - lo)
        if offset is not None:
            viewer.set_slice_offset(name, offset)
    return {name: viewer.render(name, r.size, remember=False) for name in views}


def peek_slide(viewer: Any, r: Peek) -> dict[str, Image.Image]:
    """A slide viewer's image for `r` under the name "viewer" (the caller restores the state); {} without a slide."""
    if not viewer.has_image():
        return {}
    if r.wsi_point is not None:
        viewer.set_centre(*r.wsi_point)
    if r.fill:
        vp = viewer.viewport
        scale = max(vp.width / r.size[0], vp.height / r.size[1])
        vp.width, vp.height, vp.downsample = int(r.size[0]), int(r.size[1]), vp.downsample * scale
    return {"viewer": viewer.render()}
