"""The desktop workstation (pytest-qt, offscreen): first-open layout of every module with the corner labels
inside each view, re-render on resize, opening a DICOM folder / a NIfTI file / a slide file, evidence
parsed from an answer drawn and clicked, the 3D view, and trace scrubbing."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from copilot.agent.policy import ScriptedPolicy
from copilot.gui.app import MainWindow, build_window
from copilot.medflow import make_cases
from copilot.panel.studies import RecentStudies
from tests.test_workstation import BRAIN_ANSWER
from tests.workstation_data import dicom_two_series, nifti_file

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def module_cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("ws_cases")
    return {
        "lung_petct": make_cases("lung_petct", 1, 1, out)[0],
        "longitudinal_mri": make_cases("longitudinal_mri", 1, 1, out, spacing=2.0)[0],
        "breast_wsi": make_cases("breast_wsi", 1, 2, out, slide_size=(1024, 768), mpp=2.0)[0],
    }


def _show(qtbot, window: MainWindow, size: tuple[int, int] = (1300, 800)) -> MainWindow:
    window.quiet = True
    window.recent = RecentStudies(Path(tempfile.mkdtemp()) / "recent.json")  # never the user's list
    qtbot.addWidget(window)
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: all(_fresh(p) for p in window.panes.values() if p.pane != "3d"), timeout=10000)
    return window


def _fresh(pane) -> bool:
    return pane.frame is not None and pane.frame.size == pane.device_size()


def _grab(pane) -> np.ndarray:
    image = pane.grab().toImage().convertToFormat(pane.grab().toImage().Format.Format_RGB888)
    w, h = image.width(), image.height()
    return (
        np.frombuffer(image.constBits(), dtype=np.uint8).reshape(h, image.bytesPerLine())[:, : 3 * w].reshape(h, w, 3)
    )


def _text_columns(pixels: np.ndarray, rows: slice) -> np.ndarray:
    """Columns holding the white corner text in a band of rows."""
    white = (pixels[rows] > 235).all(axis=2)
    return np.nonzero(white.any(axis=0))[0]


@pytest.mark.parametrize("module", ["brain_mri", "lung_petct", "longitudinal_mri", "breast_wsi"])
def test_first_open_layout_fills_the_views(qtbot, module: str, brain_case: Path, module_cases) -> None:
    case = brain_case if module == "brain_mri" else module_cases[module]
    window = _show(qtbot, build_window(case))
    expected = {"brain_mri": "three_up", "lung_petct": "four_up", "longitudinal_mri": "side_by_side",
                "breast_wsi": "slide"}  # fmt: skip
    assert window.layout_name == expected[module]
    area = window.area
    covered = sum(p.width() * p.height() for p in window.panes.values())
    assert covered > 0.97 * area.width() * area.height()  # the panes fill the central area
    for pane in window.panes.values():
        if pane.pane == "3d":
            continue
        w, h = pane.device_size()
        assert pane.frame.size == (w, h) and min(w, h) >= 300  # rendered at the pane's own size, not squeezed
        shown = _grab(pane)
        # the picture is the frame's pixels, 1:1 (nothing cropped or rescaled), away from the 2 px border
        same = np.abs(shown.astype(int) - pane.frame.pixels).max(axis=2) <= 8
        for m in pane.frame.markers:  # the slide's "agent's view" box is painted over its edges
            if m.kind == "box":
                for y in (m.coords[1], m.coords[3]):
                    same[max(0, int(y) - 2) : int(y) + 3] = True
        if pane.frame.image_to_ras is not None:  # the orientation letter painted at the middle of the top edge
            same[:, w // 2 - 24 : w // 2 + 24] = True
        assert same[4:60, 4:-4].mean() > 0.995
        if module != "breast_wsi":
            top_left = _text_columns(pane.frame.pixels, slice(2, 40))
            left_text = top_left[top_left < w // 2]
            right_text = top_left[top_left >= w // 2]
            assert left_text.size and left_text.min() >= 1  # "Red  axial", "S: …": starts inside the view
            assert right_text.size and right_text.max() <= w - 2  # "W: …  L: …": ends inside the view


def test_resize_re_renders_at_the_new_size(qtbot, brain_case: Path) -> None:
    window = _show(qtbot, build_window(brain_case), (1200, 700))
    red = window.panes["red"]
    before, renders = red.frame.size, window.screen_path.renders
    window.resize(1600, 1000)
    qtbot.waitUntil(lambda: _fresh(red) and red.frame.size != before, timeout=10000)
    assert red.frame.size == red.device_size() and red.frame.size[1] > before[1]
    assert window.screen_path.renders >= renders + 3
    window.set_layout("one_up")
    qtbot.waitUntil(lambda: _fresh(window.panes["red"]), timeout=10000)
    assert list(window.panes) == ["red"] and window.panes["red"].width() > 0.95 * window.area.width()


def test_open_dicom_folder_nifti_and_slide(qtbot, tmp_path: Path, module_cases) -> None:
    window = _show(qtbot, MainWindow())
    folder = dicom_two_series(tmp_path)
    picked: list[list[str]] = []

    def pick(found):
        picked.append([s.description for s in found])
        return found[1]

    window.pick_series = pick  # the series picker, answered as a clinician would
    assert window.open_path(folder)
    assert picked == [["T1 axial", "FLAIR axial"]]
    qtbot.waitUntil(lambda: all(_fresh(p) for p in window.panes.values()), timeout=10000)
    assert window.layout_name == "three_up" and window.screen_path.volumes()[0][1] == "FLAIR axial"
    assert window.panes["red"].frame.pixels.max() > 0
    assert window.open_path(nifti_file(tmp_path))
    qtbot.waitUntil(lambda: _fresh(window.panes["red"]), timeout=10000)
    assert window.screen_path.volumes()[0][1] == "patient_t2" and window.windowTitle().endswith("patient_t2.nii.gz")
    slide = next((module_cases["breast_wsi"] / "images").iterdir())
    assert window.open_path(slide)
    qtbot.waitUntil(lambda: "viewer" in window.panes and _fresh(window.panes["viewer"]), timeout=10000)
    assert window.layout_name == "slide" and window.screen_path.kind == "pathology"
    assert [p.name for p in window.recent.items()] == [slide.name, "patient_t2.nii.gz", folder.name]
    assert not window.open_path(tmp_path / "missing.nii.gz")  # an error is shown, nothing changes
    assert window.screen_path.kind == "pathology"


def test_drop_opens_a_study(qtbot, tmp_path: Path) -> None:
    from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
    from PySide6.QtGui import QDragEnterEvent, QDropEvent

    window = _show(qtbot, MainWindow())
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(nifti_file(tmp_path)))])
    enter = QDragEnterEvent(QPoint(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                            Qt.KeyboardModifier.NoModifier)  # fmt: skip
    window.dragEnterEvent(enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                      Qt.KeyboardModifier.NoModifier)  # fmt: skip
    window.dropEvent(drop)
    assert window.screen_path is not None and window.screen_path.volumes()[0][1] == "patient_t2"


def test_answer_evidence_drawn_and_clicked(qtbot, brain_case: Path, tmp_path: Path) -> None:
    window = _show(qtbot, build_window(brain_case))
    model = window.model
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"calls": [{"handler": "zoom", "args": {"view": "red", "factor": 1.0}}],
                                  "answer": BRAIN_ANSWER}))  # fmt: skip
    model.run_episode(ScriptedPolicy(script))
    qtbot.waitUntil(lambda: model.wait(0) and model.status == "done", timeout=20000)
    qtbot.waitUntil(lambda: window.panel.evidence.count() == 4, timeout=5000)
    views = model.session._viewer.state()["views"]
    assert (views["yellow"]["offset"], views["green"]["offset"], views["red"]["offset"]) == (20.0, -10.0, 10.0)
    red = window.panes["red"]
    qtbot.waitUntil(lambda: _fresh(red) and any(m.kind == "point" for m in red.frame.markers), timeout=10000)
    marker = next(m for m in red.frame.markers if m.kind == "point")
    assert red.frame.to_ras(*marker.coords) == pytest.approx([20.0, -10.0, 10.0], abs=1e-6)
    shown = _grab(red)
    x, y = (round(c / red.devicePixelRatioF()) for c in marker.coords)
    ring = shown[y - 12 : y + 13, x - 12 : x + 13].reshape(-1, 3).astype(int)
    assert (np.abs(ring - [0, 230, 255]).sum(axis=1) < 60).sum() > 10  # the selected marker is drawn
    window.panel.evidence.itemClicked.emit(window.panel.evidence.item(3))  # coronal key slice A = -10
    window.panel.evidence.itemClicked.emit(window.panel.evidence.item(1))  # axial key slice S = 10
    model.session.call("set_slice_offset", {"view": "red", "offset": 30.0, "size": 64}, actor="clinician")
    window.panel.evidence.itemClicked.emit(window.panel.evidence.item(1))
    assert model.session._viewer.view("red").offset == 10.0 and model.selected == 1


def test_3d_view_shows_the_segment(qtbot, brain_case: Path) -> None:
    from copilot.cases.pack import load_case
    from copilot.runtime import open_session

    window = _show(qtbot, build_window(brain_case))
    session = open_session(brain_case, track="B")
    out = session.call("segment_threshold", {"volume": "T1c", "output_segment": "bright", "lower": 600, "upper": 1e6})
    assert out.ok
    window.set_session(session, load_case(brain_case))
    window.set_layout("four_up")
    qtbot.waitUntil(lambda: window.panes["3d"].frame is not None, timeout=30000)
    pane = window.panes["3d"]
    qtbot.waitUntil(lambda: pane.frame.size == pane.device_size(), timeout=30000)
    pixels = pane.frame.pixels
    colour = np.array(session._viewer.state()["segments"] and window.screen_path.scene3d_inputs()["segments"][0].colour)
    assert pixels.std() > 10 and (np.linalg.norm(pixels.astype(float) - colour, axis=2) < 80).sum() > 50
    before = pixels.copy()
    from PySide6.QtCore import QPoint, Qt

    start = QPoint(pane.width() // 2, pane.height() // 2)
    qtbot.mousePress(pane, Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseMove(pane, start + QPoint(80, 0))
    qtbot.mouseRelease(pane, Qt.MouseButton.LeftButton, pos=start + QPoint(80, 0))
    qtbot.waitUntil(lambda: not np.array_equal(pane.frame.pixels, before), timeout=30000)
    assert window.scene3d.camera.azimuth != -30.0  # turned from the default oblique view
    session.call("record_point", {"ras": [20.0, -10.0, 10.0], "label": "lesion"})
    window.panel.evidence.itemClicked.emit(window.panel.evidence.item(0))  # selecting it turns the 3D view about it
    window.render_3d_now()
    assert window.scene3d.camera.focus == (20.0, -10.0, 10.0)


def test_trace_scrubbing_restores_the_recorded_views(qtbot, brain_case: Path, tmp_path: Path) -> None:
    from copilot.cases.pack import load_case
    from copilot.runtime import open_session

    trace = tmp_path / "trace"
    session = open_session(brain_case, trace_dir=trace)
    script = tmp_path / "s.json"
    calls = [
        {"handler": "set_slice_offset", "args": {"view": "red", "offset": 10.0, "size": 128}},
        {"handler": "zoom", "args": {"view": "green", "factor": 2.0, "size": 128}},
        {"handler": "jump", "args": {"ras": [20.0, -10.0, 10.0], "size": 128}},
    ]
    script.write_text(json.dumps({"calls": calls, "answer": BRAIN_ANSWER}))
    result = ScriptedPolicy(script).run(session, load_case(brain_case), 10)
    session.close({"status": result.status, "response": result.response})
    window = _show(qtbot, build_window(trace))
    dock = window.replay_dock
    assert dock is not None and window.timeline.verified and dock.slider.maximum() == 3
    assert window.panel.evidence.count() == 4  # the answer's evidence, from the trace's final event
    events = [json.loads(line) for line in (trace / "trace.jsonl").read_text().splitlines()]
    states = [e["state"] for e in events if e["type"] == "handler_call"]
    for k in (1, 0, 3, 2):
        dock.slider.setValue(k)
        assert window.timeline.position == k and "matches the trace" in dock.position.text()
        assert json.dumps(window.model.session.snapshot(), sort_keys=True) == json.dumps(states[k], sort_keys=True)
        recorded, again = window.timeline.rendered_hashes(k)
        assert recorded and recorded == again  # the views show exactly what the call returned
        qtbot.waitUntil(lambda: _fresh(window.panes["red"]), timeout=10000)
        offset = states[k]["views"]["red"]["offset"]
        assert window.panes["red"].frame.to_ras(0, 0)[2] == pytest.approx(offset, abs=1e-6)


def test_hidpi_panes_render_at_device_pixels(brain_case: Path) -> None:
    """At a device pixel ratio of 2, each pane's picture has twice the widget's logical size."""
    import os
    import subprocess
    import sys

    code = (
        "from PySide6.QtWidgets import QApplication\n"
        "from copilot.gui.app import build_window\n"
        "app = QApplication([])\n"
        f"w = build_window({str(brain_case)!r}); w.quiet = True; w.resize(1400, 800); w.show()\n"
        "for _ in range(20): app.processEvents()\n"
        "p = w.panes['red']\n"
        "print(p.devicePixelRatioF(), p.width(), p.height(), *p.frame.size)\n"
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "QT_SCALE_FACTOR": "2",
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    ratio, w, h, fw, fh = out.stdout.split()[-5:]
    assert float(ratio) == 2.0 and (int(fw), int(fh)) == (2 * int(w), 2 * int(h))


def test_no_display_says_so_in_one_line(monkeypatch, capsys) -> None:
    from copilot.gui.app import main

    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    assert main(None) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("medcopilot gui: no display")


def test_qt_binding_keeps_none_alive() -> None:
    """Void Qt methods must not drop references to None (PySide6 6.12.0 does: a long session then aborts)."""
    import sys

    from PySide6.QtWidgets import QLabel

    label = QLabel()
    before = sys.getrefcount(None)
    for _ in range(2000):
        label.update()
        label.setText("x")
    assert sys.getrefcount(None) >= before - 50
