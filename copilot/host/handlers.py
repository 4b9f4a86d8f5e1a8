"""Handlers only a host session offers: reading the host's own annotations (read-only, nothing identifying)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from copilot.errors import HandlerError
from copilot.tools.registry import HandlerOutput, Registry, SlideContext

QUPATH_HOST = Registry("pathology")


@QUPATH_HOST.handler(role="viewer_control")
def list_annotations(
    ctx: SlideContext,
    limit: Annotated[int, Field(ge=1, le=500, description="At most this many annotations, in QuPath's order.")] = 100,
) -> HandlerOutput:
    """List the annotations already on the open image in QuPath (class, shape, centroid and bounds in level-0
    pixels, locked); read-only. The pathologist's own annotation names are withheld."""
    read = getattr(ctx.viewer, "annotations", None)
    if read is None:
        raise HandlerError("not_supported", "this viewer has no annotations of its own to list")
    items = read()
    return HandlerOutput({"count": len(items), "annotations": items[:limit], "truncated": len(items) > limit})
