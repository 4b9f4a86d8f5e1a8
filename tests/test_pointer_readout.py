"""The value under a resting pointer follows the picture (Qt-free view-model): after a wheel scroll, a key, an
agent's call, a layout change or a series switch, with the pointer still, the status bar reads the voxel now
under it; on a slide, the pixels and µm under it after a zoom or pan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from copilot.engine.slide.viewer import Viewport
from copilot.panel.pointer import PointerReadout
from copilot.panel.probe import voxel_value
from copilot.panel.screen import Frame, Screen
from copilot.panel.studies import dicom_series, open_study, study_for
from tests.test_clinician_basics import write_series

SIZE = (240, 240)


@pytest.fixture
def screen(tmp_path: Path) -> Screen:
    """A CT whose slice k reads 10·k HU everywhere and 500 + 10·k HU at a nodule, and a second CT of 2000 HU."""
    stored = np.stack([np.full((12, 12), 1024 + 10 * k, dtype=np.uint16) for k in range(8)])
    stored[:, 5:8, 5:8] += 500
    write_series(tmp_path / "exam" / "ct", "CT", stored, intercept=-1024.0, description="Thorax", number=2)
    other = np.full((8, 12, 12), 3024, dtype=np.uint16)
    write_series(tmp_path / "exam" / "ct2", "CT", other, intercept=-1024.0, description="Other", number=3)
    found = dicom_series(tmp_path / "exam")
    return Screen(open_study(study_for(tmp_path / "exam", found)))


def _volume(screen: Screen) -> Any:
    data = screen.session.scene_data()
    assert data is not None
    return data["volume"]


def _expected(screen: Screen, frame: Frame | None) -> tuple[list[float], float | None]:
    ras = frame.to_ras(120.0, 120.0) if frame is not None else None
    assert ras is not None
    return ras, voxel_value(_volume(screen), ras)


def test_the_value_follows_a_wheel_scroll_with_the_pointer_still(screen: Screen) -> None:
    pointer = PointerReadout(screen)
    frame = screen.frame("red", SIZE)
    assert frame is not None
    first = pointer.moved("red", 120.0, 120.0, frame)  # the pointer rests on the nodule
    ras, value = _expected(screen, frame)
    assert value is not None and f"S {ras[2]:.1f} mm" in first and f"Thorax {value:.0f} HU" in first
    for how in ("wheel", "key", "agent"):
        if how == "wheel":
            assert screen.act("scroll", {"view": "red", "direction": "down", "num_slices": 2}).ok
        elif how == "key":
            assert screen.act("scroll", {"view": "red", "direction": "up", "num_slices": 1}).ok
        else:
            offset = screen.view("red").offset - 4.0
            assert screen.session.call("set_slice_offset", {"view": "red", "offset": offset}).ok
        new = screen.frame("red", SIZE)
        line = pointer.shown("red", new)
        ras2, value2 = _expected(screen, new)
        assert line is not None and value2 is not None and ras2[2] != ras[2], how
        assert f"S {ras2[2]:.1f} mm" in line and line.endswith(f"Thorax {value2:.0f} HU"), (how, line)
        assert value2 == 500 + 10 * round(_volume(screen).ras_to_ijk_point(np.array(ras2))[2])
        ras = ras2
    assert pointer.shown("yellow", screen.frame("yellow", SIZE)) is None  # another pane: not under the pointer


def test_a_layout_change_and_a_series_switch_read_again(screen: Screen) -> None:
    pointer = PointerReadout(screen)
    pointer.moved("red", 120.0, 120.0, screen.frame("red", SIZE))
    pointer.left()  # the layout is rebuilt; the pointer, unmoved, is over the new red pane
    assert pointer.shown("red", screen.frame("red", SIZE)) is None
    assert pointer.moved("red", 60.0, 60.0, None) == ""  # not yet rendered at its new size
    line = pointer.shown("red", screen.frame("red", (320, 320)))
    assert line is not None and "Thorax" in line and "HU" in line
    other = next(vid for vid, name in screen.volumes() if name == "Other")
    assert screen.act("select_volume", {"volume_id": other}).ok
    line = pointer.shown("red", screen.frame("red", (320, 320)))
    assert line is not None and line.endswith("Other 2000 HU")


def test_the_slide_readout_follows_a_zoom_with_the_pointer_still(tmp_path: Path) -> None:
    from copilot.medflow import make_cases

    case = make_cases("breast_wsi", 1, 2, tmp_path / "cases", slide_size=(1024, 768), mpp=2.0)[0]
    screen = Screen(open_study(study_for(next((case / "images").iterdir()))))
    pointer = PointerReadout(screen)
    frame = screen.frame("viewer", (400, 300))
    assert frame is not None and frame.viewport is not None
    before = pointer.moved("viewer", 300.0, 100.0, frame)
    assert screen.act("zoom", {"direction": "in", "amount": 2, "unit": "factor"}).ok
    new = screen.frame("viewer", (400, 300))
    assert new is not None and new.viewport is not None
    vp: Viewport = new.viewport
    x, y = vp.screen_to_level0(300.0, 100.0)
    line = pointer.shown("viewer", new)
    assert line == screen.slide_readout(x, y) != before and f"{x * 2.0:.1f} µm" in line


@pytest.mark.gui
def test_window_status_bar_follows_a_wheel_scroll_with_the_pointer_still(qtbot: Any, tmp_path: Path) -> None:
    """In the window: the pointer rests on the red pane, the wheel turns; the status bar reads the new slice."""
    from PySide6.QtCore import QPoint, QPointF, Qt
    from PySide6.QtGui import QMouseEvent, QWheelEvent

    from tests.test_clinician_basics import _window

    stored = np.stack([np.full((12, 12), 1024 + 10 * k, dtype=np.uint16) for k in range(8)])
    write_series(tmp_path / "exam", "CT", stored, intercept=-1024.0, description="Thorax", number=2)
    window, _ = _window(qtbot, tmp_path / "exam")
    red = window.panes["red"]
    r = red.devicePixelRatioF()
    at = QPointF(red.width() / 2, red.height() / 2)
    red.mouseMoveEvent(QMouseEvent(QMouseEvent.Type.MouseMove, at, at, Qt.MouseButton.NoButton,
                                   Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))  # fmt: skip
    before = window.readout.text()
    assert "Thorax" in before and "HU" in before
    wheel = QWheelEvent(at, at, QPoint(0, 0), QPoint(0, -120), Qt.MouseButton.NoButton,
                        Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)  # fmt: skip
    red.wheelEvent(wheel)
    qtbot.waitUntil(lambda: window.readout.text() != before, timeout=5000)
    assert red.frame is not None
    ras = red.frame.to_ras(at.x() * r, at.y() * r)
    assert ras is not None
    assert window.readout.text() == window.screen_path.readout(ras)  # the voxel under the pointer, new slice
