"""A third viewer kind added through its descriptor alone: a 2D image viewer with two handlers, opened,
called through the session, traced and replayed, with no change anywhere else in the code; the descriptor's
fields it does not use keep defaults that ask nothing of it."""

from __future__ import annotations

import copy
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest
from PIL import Image
from pydantic import Field

from copilot.engine.peek import Peek
from copilot.errors import HandlerError
from copilot.kinds import KINDS, ViewerKind, register_kind
from copilot.panel.answer_evidence import answer_evidence
from copilot.panel.layout import default_layout
from copilot.replay import replay
from copilot.runtime import open_session
from copilot.study.privacy import disclosure
from copilot.tools.protocols import paper_tools
from copilot.tools.registry import HandlerContext, HandlerOutput, ImageOut, Registry


class PictureViewer:
    """A 2D picture with a zoom factor: the whole state is (file, zoom)."""

    kind = "picture"

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
        return copy.deepcopy({"zoom": self.zoom})

    def scene_data(self) -> dict[str, Any]:
        return {}


PICTURES = Registry("picture")
PictureContext = HandlerContext[PictureViewer]


@PICTURES.handler(role="viewer_control")
def open_picture(ctx: PictureContext) -> HandlerOutput:
    """Open the study's picture (a greyscale PNG named by the case inputs)."""
    assert ctx.case_root is not None
    ctx.viewer.pixels = np.asarray(Image.open(ctx.case_root / ctx.case_inputs["picture"]).convert("L"))
    ctx.viewer.zoom = 1.0
    return HandlerOutput({"shape": list(ctx.viewer.pixels.shape)})


@PICTURES.handler(role="viewer_control")
def zoom_picture(
    ctx: PictureContext,
    factor: Annotated[float, Field(description="zoom factor, 1 to 8", ge=1.0, le=8.0)],
) -> HandlerOutput:
    """Zoom about the picture's centre and return the view."""
    ctx.viewer.zoom = float(factor)
    return HandlerOutput({"zoom": ctx.viewer.zoom}, [ImageOut("picture", ctx.viewer.render())])


@pytest.fixture(scope="module")
def picture_kind() -> ViewerKind:
    kind = KINDS.get("picture") or register_kind(
        ViewerKind("picture", PictureViewer, PICTURES, "open_picture", ("zoom_picture", {"factor": 1.0}),
                   ("picture",), stepwise=False, slicer_api=False)
    )  # fmt: skip
    return kind


@dataclass(frozen=True)
class PictureStudy:
    root: Path
    case_id: str
    module: str = ""
    kind: str = "picture"
    inputs: dict[str, Any] = field(default_factory=dict)


def test_a_third_kind_opens_calls_and_replays(picture_kind: ViewerKind, tmp_path: Path) -> None:
    gradient = np.tile(np.arange(0, 256, 4, dtype=np.uint8), (64, 1))
    Image.fromarray(gradient).save(tmp_path / "picture.png")
    study = PictureStudy(tmp_path, "picture-1", inputs={"picture": "picture.png"})
    session = open_session(study, trace_dir=tmp_path / "trace")
    assert session.kind == "picture" and session.snapshot()["shape"] == [64, 64]
    out = session.call("zoom_picture", {"factor": 2.0})
    assert out.ok and out.result == {"zoom": 2.0}
    shown = np.asarray(Image.open(io.BytesIO(out.images[0].data)))
    assert shown[0, 0] == gradient[16, 16] and shown[0, -1] == gradient[16, 47]  # the central half, doubled
    refused = session.call("zoom_picture", {"factor": 20.0})
    assert not refused.ok and refused.status == 422 and session.snapshot()["zoom"] == 2.0  # nothing changed
    assert session.peek(Peek(size=(32, 32)))["picture"].size == (32, 32)  # type: ignore[index]
    session.close()
    report = replay(tmp_path / "trace")
    assert report.ok and report.calls == 3, report.summary()


def test_a_kind_is_declared_once(picture_kind: ViewerKind) -> None:
    with pytest.raises(ValueError, match="declared twice"):
        register_kind(ViewerKind("picture", PictureViewer, PICTURES, "open_picture", ("zoom_picture", {}),
                                 ("picture",), stepwise=False, slicer_api=False))  # fmt: skip
    with pytest.raises(ValueError, match="open handler"):
        register_kind(ViewerKind("sketch", PictureViewer, Registry("sketch"), "open_sketch", ("x", {}), ("s",),
                                 stepwise=False, slicer_api=False))  # fmt: skip


def test_a_third_kind_needs_only_the_fields_it_uses(picture_kind: ViewerKind) -> None:
    """No slice views, no slide coordinates, no evidence lines, no paper tool list: the defaults."""
    assert not picture_kind.slice_views and not picture_kind.slide_coordinates
    assert answer_evidence("EVIDENCE:\nRAS: [1, 2, 3]\nWSI: [4, 5]", "picture") == []  # states no evidence lines
    assert len(answer_evidence("EVIDENCE:\nRAS: [1, 2, 3]", "radiology")) == 1  # while radiology reads its RAS
    assert paper_tools("picture") == () and "zoom" in paper_tools("pathology")
    assert default_layout("picture", "", []) == picture_kind.layout == "three_up"
    assert picture_kind.host_app == "—"
    assert "rendered images and tool results" in disclosure("https://models.example/v1", "picture")
