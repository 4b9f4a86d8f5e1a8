"""The desktop copilot (pytest-qt, offscreen): a scripted agent through the panel — timeline in order,
evidence clicks move the views, approve mode blocks until approval, stop ends the episode, and the
event loop keeps running during a slow handler."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

import itertools

from PySide6.QtCore import QTimer

from copilot.agent.policy import ScriptedPolicy
from copilot.gui.app import build_window

pytestmark = pytest.mark.gui


@pytest.fixture
def window(qtbot, brain_case: Path):
    """The main window on the shared brain case, shown and painted."""
    win = build_window(brain_case)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    win.refresh()
    return win


def _script(tmp_path: Path, calls: list[dict], answer: str = "ANSWER: A") -> ScriptedPolicy:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"calls": calls, "answer": answer}))
    return ScriptedPolicy(path)


CALLS = [
    {"handler": "select_volume", "args": {"volume_name": "T1c", "view": "red", "size": 96}},
    {"handler": "set_slice_offset", "args": {"view": "red", "offset": 10.0, "size": 96}},
    {"handler": "record_point", "args": {"ras": [20.0, -10.0, 10.0], "label": "lesion"}},
    {"handler": "record_key_slice", "args": {"view": "green", "offset": -30.0, "label": "coronal"}},
]


def _wheel_up(widget) -> None:
    """One wheel notch away from the user, at the widget's centre."""
    from PySide6.QtCore import QPoint, QPointF, Qt
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    centre = QPointF(widget.width() / 2, widget.height() / 2)
    wheel = QWheelEvent(
        centre,
        widget.mapToGlobal(centre),
        QPoint(0, 0),
        QPoint(0, 120),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, wheel)


def test_timeline_and_evidence_clicks(qtbot, window, tmp_path: Path) -> None:
    model = window.model
    model.run_episode(_script(tmp_path, CALLS))
    qtbot.waitUntil(lambda: model.status == "done", timeout=20000)
    qtbot.waitUntil(lambda: window.panel.timeline.count() == len(model.timeline), timeout=5000)
    agent = [e.handler for e in model.timeline if e.actor == "agent"]
    assert agent == [c["handler"] for c in CALLS]
    texts = [window.panel.timeline.item(i).text() for i in range(window.panel.timeline.count())]
    assert texts == [f"{n + 1}. [agent] {c['handler']} — ok" for n, c in enumerate(CALLS)]
    qtbot.waitUntil(lambda: "ANSWER: A" in window.panel.chat.toPlainText(), timeout=5000)
    assert window.panel.budget.value() == 4 and window.panel.evidence.count() == 2
    window.panel.evidence.itemClicked.emit(window.panel.evidence.item(0))  # the RAS point
    views = model.session._viewer.state()["views"]
    assert (views["yellow"]["offset"], views["green"]["offset"], views["red"]["offset"]) == (20.0, -10.0, 10.0)
    window.panel.evidence.itemClicked.emit(window.panel.evidence.item(1))  # the coronal key slice
    assert model.session._viewer.state()["views"]["green"]["offset"] == -30.0
    assert [e.actor for e in model.timeline][-2:] == ["clinician", "clinician"]  # audited like the agent
    report = model.export_report(tmp_path / "report.html").read_text(encoding="utf-8")
    assert report.count("<img") == 3 + 1 and "ANSWER: A" in report


def test_approve_mode_blocks_until_approval_and_stop_ends(qtbot, window, tmp_path: Path) -> None:
    model = window.model
    window.panel.approve_mode.setChecked(True)
    model.run_episode(_script(tmp_path, CALLS))
    qtbot.waitUntil(lambda: model.pending is not None, timeout=10000)
    time.sleep(0.3)
    assert model.pending.handler == "select_volume" and model.rounds_used == 0  # nothing ran
    assert model.session._viewer.state()["active_volume_name"] == "FLAIR"
    qtbot.waitUntil(lambda: window.panel.approve_button.isEnabled(), timeout=5000)
    window.panel.approve_button.click()
    qtbot.waitUntil(lambda: model.pending is not None and model.pending.handler == "set_slice_offset", timeout=10000)
    assert model.session._viewer.state()["active_volume_name"] == "T1c"
    qtbot.waitUntil(lambda: window.panel.reject_button.isEnabled(), timeout=5000)
    window.panel.reject_button.click()
    qtbot.waitUntil(lambda: model.pending is not None and model.pending.handler == "record_point", timeout=10000)
    assert [e.status for e in model.timeline if e.actor == "agent"][:2] == ["ok", "rejected"]
    window.panel.stop_button.click()
    qtbot.waitUntil(lambda: model.status == "stopped", timeout=10000)
    assert model.session.evidence() == []  # the episode ended before recording anything


def test_event_loop_serviced_during_a_slow_handler(qtbot, window, tmp_path: Path) -> None:
    model = window.model
    cine = {"handler": "scroll", "args": {"view": "red", "num_slices": 40, "output": "cine", "size": 512}}
    slow = [cine] * 4  # long enough (> 0.3 s) on a fast machine
    ticks: list[float] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start(20)
    t0 = time.perf_counter()
    model.run_episode(_script(tmp_path, slow))
    qtbot.waitUntil(lambda: model.status == "done", timeout=60000)
    elapsed = time.perf_counter() - t0
    timer.stop()
    assert elapsed > 0.3
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) >= 0.5 * elapsed / 0.02 and max(gaps) < 0.5  # the GUI thread never stalled


def test_mouse_scroll_click_and_window_level(qtbot, window) -> None:
    from PySide6.QtCore import QPoint, Qt

    model, red = window.model, window.panes["red"]
    viewer = model.session._viewer
    before = viewer.view("red").offset
    _wheel_up(red)
    assert viewer.view("red").offset == pytest.approx(before + viewer.slice_step("red"))
    qtbot.mouseMove(red, QPoint(int(red.width() * 0.6), int(red.height() / 2)))
    assert window.readout.text().startswith("R ")
    point = QPoint(int(red.width() * 0.6), int(red.height() * 0.45))
    qtbot.mouseClick(red, Qt.MouseButton.LeftButton, pos=point)
    assert model.crosshair is not None and model.timeline[-1].handler == "set_slice_offset"  # planes, no shift
    assert viewer.view("yellow").offset == pytest.approx(model.crosshair[0])  # linked: sagittal at the click's R
    level = viewer.display(viewer.resolve_volume()).level
    qtbot.mousePress(red, Qt.MouseButton.RightButton, pos=point)
    qtbot.mouseRelease(red, Qt.MouseButton.RightButton, pos=point + QPoint(40, -30))
    d = viewer.display(viewer.resolve_volume())
    assert d.level > level and model.timeline[-1].handler == "wl" and model.timeline[-1].actor == "clinician"


def test_slide_view_zooms_and_pans(qtbot, tmp_path: Path) -> None:
    from PySide6.QtCore import QPoint, Qt

    from copilot.medflow import make_cases

    case = make_cases("breast_wsi", 1, 2, tmp_path, slide_size=(1024, 768), mpp=2.0)[0]
    window = build_window(case)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.refresh()
    view, viewer = window.panes["viewer"], window.model.session._viewer
    d0 = viewer.viewport.downsample
    _wheel_up(view)
    assert viewer.viewport.downsample == pytest.approx(d0 / 1.25)
    cx = viewer.viewport.cx
    start = QPoint(int(view.width() / 2), int(view.height() / 2))
    qtbot.mousePress(view, Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseRelease(view, Qt.MouseButton.LeftButton, pos=start + QPoint(50, 0))
    assert viewer.viewport.cx < cx  # dragged right: the view moved left over the slide
    qtbot.mouseMove(view, start)
    assert window.readout.text().endswith("(level 0)")
    rec = window.model.session.call("record_view_evidence", {"label": "roi", "x": 300, "y": 400}).result["evidence"]
    window.refresh()
    qtbot.mouseClick(window.panes["viewer"], Qt.MouseButton.LeftButton, pos=start)  # no effect on slides
    window.panel.evidence.itemClicked.emit(window.panel.evidence.item(0))
    assert (viewer.viewport.cx, viewer.viewport.cy) == pytest.approx((rec["point"]["x"], rec["point"]["y"]), abs=0.01)
