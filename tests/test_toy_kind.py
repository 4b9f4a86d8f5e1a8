"""A third viewer kind added through its descriptor alone (the toy plug-in's 2D picture viewer with two handlers,
registered in-process here): opened, called through the session, traced and replayed, with no change anywhere
else in the code; the descriptor's fields it does not use keep defaults that ask nothing of it."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from copilot.engine.peek import Peek
from copilot.kinds import ViewerKind, kinds, register_kind
from copilot.panel.answer_evidence import answer_evidence
from copilot.panel.layout import default_layout, panes
from copilot.panel.screen import Screen
from copilot.replay import replay
from copilot.runtime import open_session
from copilot.study.privacy import disclosure
from copilot.tools.protocols import paper_tools
from copilot.tools.registry import Registry
from tests.toy_plugin.toy_plugin.kind import HANDLERS, KIND, PictureViewer


@pytest.fixture(scope="module")
def picture_kind() -> ViewerKind:
    return kinds().get("toy") or register_kind(KIND)


@dataclass(frozen=True)
class PictureStudy:
    root: Path
    case_id: str
    module: str = ""
    kind: str = "toy"
    inputs: dict[str, Any] = field(default_factory=dict)


def test_a_third_kind_opens_calls_and_replays(picture_kind: ViewerKind, tmp_path: Path) -> None:
    gradient = np.tile(np.arange(0, 256, 4, dtype=np.uint8), (64, 1))
    Image.fromarray(gradient).save(tmp_path / "picture.png")
    study = PictureStudy(tmp_path, "picture-1", inputs={"picture": "picture.png"})
    session = open_session(study, trace_dir=tmp_path / "trace")
    assert session.kind == "toy" and session.snapshot()["shape"] == [64, 64]
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
        register_kind(ViewerKind("toy", PictureViewer, HANDLERS, "open_picture", ("zoom_picture", {}),
                                 ("picture",), stepwise=False, slicer_api=False))  # fmt: skip
    with pytest.raises(ValueError, match="open handler"):
        register_kind(ViewerKind("sketch", PictureViewer, Registry("sketch"), "open_sketch", ("x", {}), ("s",),
                                 stepwise=False, slicer_api=False))  # fmt: skip


def test_a_third_kind_needs_only_the_fields_it_uses(picture_kind: ViewerKind) -> None:
    """No slice views, no slide coordinates, no evidence lines, no paper tool list: the defaults."""
    assert not picture_kind.slice_views and not picture_kind.slide_coordinates
    assert answer_evidence("EVIDENCE:\nRAS: [1, 2, 3]\nWSI: [4, 5]", "toy") == []  # states no evidence lines
    assert len(answer_evidence("EVIDENCE:\nRAS: [1, 2, 3]", "radiology")) == 1  # while radiology reads its RAS
    assert paper_tools("toy") == () and "zoom" in paper_tools("pathology")
    assert default_layout("toy", "", []) == picture_kind.layout == "views" and picture_kind.display == "pictures"
    assert panes("views", views=picture_kind.view_names) == ["picture"]  # the desktop shows its own views
    assert picture_kind.host_app == "—"
    assert "rendered images and tool results" in disclosure("https://models.example/v1", "toy")


def test_the_desktop_screen_shows_a_third_kind_as_pictures(picture_kind: ViewerKind, tmp_path: Path) -> None:
    """The desktop's screen path (Qt-free) renders each view of a kind that is neither slice views nor a slide as
    its viewer draws it, fitted into the pane with its proportions kept and black around it, and follows the
    agent's calls; rendered again only when the scene changed."""
    pixels = np.full((64, 64), 100, np.uint8)
    pixels[8:24, 8:24] = 255
    Image.fromarray(pixels).save(tmp_path / "picture.png")
    session = open_session(PictureStudy(tmp_path, "picture-2", inputs={"picture": "picture.png"}),
                           trace_dir=tmp_path / "trace")  # fmt: skip
    screen = Screen(session)
    try:
        frame = screen.frame("picture", (200, 100))
        assert frame is not None and frame.size == (200, 100) and frame.markers == []
        assert frame.pixels[50, 10].tolist() == [0, 0, 0] and frame.pixels[50, 100].tolist() == [100] * 3
        assert frame.pixels[25, 75].tolist() == [255] * 3  # the square: picture pixel (16, 16) at x 50 + 25
        assert screen.frame("picture", (200, 100)) is not None and screen.renders == 1  # from the cache
        session.call("zoom_picture", {"factor": 2.0}, actor="agent")
        zoomed = screen.frame("picture", (200, 100))
        assert zoomed is not None and screen.renders == 2
        assert zoomed.pixels[10, 60].tolist() == [255] * 3 and zoomed.pixels[50, 100].tolist() == [100] * 3
    finally:
        screen.detach()
        session.close()
