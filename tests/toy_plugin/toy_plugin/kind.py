"""The `toy` viewer kind: one greyscale picture and a zoom factor, with two handlers (open, zoom)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
from PIL import Image
from pydantic import Field

from copilot.cases.pack import check_relative_path
from copilot.engine.peek import Peek
from copilot.errors import HandlerError
from copilot.kinds import ViewerKind
from copilot.tools.registry import HandlerContext, HandlerOutput, ImageOut, Registry


class PictureViewer:
    """A 2D picture with a zoom factor about its centre: the whole state is (pixels, zoom)."""

    kind = "toy"

    def __init__(self) -> None:
        self.pixels: np.ndarray | None = None
        self.zoom = 1.0

    def export_state(self) -> dict[str, Any]:
        return {"pixels": self.pixels, "zoom": self.zoom}

    def restore_state(self, state: dict[str, Any]) -> None:
        self.pixels, self.zoom = state["pixels"], state["zoom"]

    def state(self) -> dict[str, Any]:
        shape = None if self.pixels is None else list(self.pixels.shape)
        return {"image_open": self.pixels is not None, "shape": shape, "zoom": self.zoom}

    def render(self, size: int = 64) -> Image.Image:
        """The zoomed centre of the picture, resampled to `size` square."""
        if self.pixels is None:
            raise HandlerError("no_image", "no picture is open")
        h, w = self.pixels.shape
        ch, cw = max(1, int(h / self.zoom)), max(1, int(w / self.zoom))
        top, left = (h - ch) // 2, (w - cw) // 2
        crop = self.pixels[top : top + ch, left : left + cw]
        return Image.fromarray(crop).resize((size, size), Image.Resampling.NEAREST)

    def peek(self, request: Peek) -> dict[str, Image.Image]:
        return {} if self.pixels is None else {"picture": self.render(request.size[0])}

    def geometry(self, view: str) -> dict[str, float]:
        return {"zoom": self.zoom}

    def scene_data(self) -> dict[str, Any]:
        return {}


HANDLERS = Registry("toy")
Context = HandlerContext[PictureViewer]


@HANDLERS.handler(role="viewer_control")
def open_picture(ctx: Context) -> HandlerOutput:
    """Open the study's picture (the greyscale PNG its case inputs name)."""
    assert ctx.case_root is not None
    name = check_relative_path(ctx.case_inputs.get("picture"), "inputs.picture")
    ctx.viewer.pixels = np.asarray(Image.open(Path(ctx.case_root) / name).convert("L"))
    ctx.viewer.zoom = 1.0
    return HandlerOutput({"shape": list(ctx.viewer.pixels.shape)})


@HANDLERS.handler(role="viewer_control")
def zoom_picture(
    ctx: Context,
    factor: Annotated[float, Field(description="zoom factor, 1 to 8", ge=1.0, le=8.0)],
) -> HandlerOutput:
    """Zoom about the picture's centre and return the view."""
    ctx.viewer.zoom = float(factor)
    return HandlerOutput({"zoom": ctx.viewer.zoom}, [ImageOut("picture", ctx.viewer.render())])


KIND = ViewerKind(
    "toy",
    PictureViewer,
    HANDLERS,
    "open_picture",
    ("zoom_picture", {"factor": 1.0}),
    ("picture",),
    stepwise=False,
    slicer_api=False,
    image_name="picture",
    system_prompt="You read one greyscale picture with the tools given. Case {case_id}; at most {budget} tool calls.",
)
