"""The desktop's measurements panel (offscreen Qt): after a baseline report of the patient, the follow-up study's
session measures `target 1` bidirectionally and an ellipse; the panel lists both measurements with their numbers,
and once the report is stored, the lesion's history: its baseline axes, then this session's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QTableWidget

from copilot.gui.app import MainWindow
from copilot.gui.measurements_dock import MeasurementsDock
from copilot.pacs.sample import write_ct_series
from copilot.panel.studies import RecentStudies, open_study, study_for

pytestmark = pytest.mark.gui


def _axes(c: list[float], long_mm: float, short_mm: float) -> dict[str, list[float]]:
    return {"long_a": [c[0] - long_mm / 2, c[1], c[2]], "long_b": [c[0] + long_mm / 2, c[1], c[2]],
            "short_a": [c[0], c[1] - short_mm / 2, c[2]], "short_b": [c[0], c[1] + short_mm / 2, c[2]]}  # fmt: skip


def _text(table: QTableWidget, row: int, column: int) -> str:
    item = table.item(row, column)
    return item.text() if item is not None else ""


def _centre(volume: object) -> list[float]:
    shape = np.array(volume.data.shape[::-1])  # type: ignore[attr-defined]
    return [round(float(v), 3) for v in volume.ijk_to_ras_point((shape - 1) / 2.0)]  # type: ignore[attr-defined]


def test_measurements_panel_lists_numbers_and_the_lesion_history(qtbot, tmp_path: Path) -> None:
    for name in ("baseline", "week8"):
        write_ct_series(tmp_path / "patient" / name, 4)
    first = open_study(study_for(str(tmp_path / "patient" / "baseline")), tmp_path / "sessions" / "baseline",
                       track="B")  # fmt: skip
    first.allow_store = (str(tmp_path / "sessions"),)
    c = _centre(first.scene_data()["volume"])  # type: ignore[index]
    assert first.call("measure_bidirectional", {**_axes(c, 40, 25), "label": "target 1"}).ok
    assert first.call("export_response_sr", {"criteria": "recist", "output_name": "base", "time_point": "baseline"}).ok
    first.close()

    win = MainWindow(recent=RecentStudies(tmp_path / "recent.json"))
    win.quiet = True
    qtbot.addWidget(win)
    win.resize(1400, 900)
    assert win.open_path(str(tmp_path / "patient" / "week8"), trace_dir=tmp_path / "sessions" / "week8")
    model = win.model
    assert model is not None
    assert model.act("measure_bidirectional", {**_axes(c, 26, 15), "label": "Target 1"}).ok
    assert model.act("measure_ellipse", {"center_ras": c, "radius_x_mm": 4, "radius_y_mm": 4, "label": "liver"}).ok
    action = next(a for a in win.findChildren(QAction) if a.text() == "Measurements and lesions")
    action.trigger()
    dock = win.findChild(MeasurementsDock)
    assert isinstance(dock, MeasurementsDock)
    cells = [[_text(dock.table, r, k) for k in range(3)] for r in range(dock.table.rowCount())]
    assert cells[0] == ["Target 1", "bidirectional", "26.0 × 15.0 mm"]
    assert cells[1][:2] == ["liver", "ellipse"] and "area 50.3 mm²" in cells[1][2]
    assert dock.history.rowCount() == 0 and "none yet" in dock.history_label.text()

    model.session.allow_store = (str(tmp_path / "sessions"),)
    assert model.session.call("export_evidence_sr", {"output_name": "week8"}, actor="clinician").ok  # joins the book
    history = dock.refresh()
    assert history.time_points == ["baseline", "this session"]
    row = [_text(dock.history, 0, k) for k in range(3)]
    assert row == ["target 1", "40.0 × 25.0 mm", "26.0 × 15.0 mm"]
    shot = tmp_path / "measurements.png"
    assert dock.grab().save(str(shot)) and shot.stat().st_size > 0
    win.close()


def test_bidirectional_and_ellipse_drawn_with_the_mouse_are_the_clinicians_evidence(qtbot, tmp_path: Path) -> None:
    """Toolbar → Bidirectional: a drag along the image's rows (the long axis), then a slanted drag across it: the
    short axis is laid exactly perpendicular through the long axis, as long as the drag across it; Ellipse ROI: a
    drag across its box records the ellipse with its statistics; the ruler is off while a shape tool is on."""
    from PySide6.QtCore import QPoint, Qt

    from tests.test_workstation_gui import _show

    write_ct_series(tmp_path / "ct", 4)
    win = MainWindow(recent=RecentStudies(tmp_path / "recent.json"))
    win.no_dialogs = True
    _show(qtbot, win)
    assert win.open_path(str(tmp_path / "ct"), trace_dir=tmp_path / "t")
    qtbot.waitUntil(lambda: all(p.frame is not None for p in win.panes.values()), timeout=10000)
    red = win.panes["red"]
    win.ruler_action.setChecked(True)  # type: ignore[union-attr]
    win.shape_actions["bidirectional"].setChecked(True)  # type: ignore[attr-defined]
    assert not win.ruler_action.isChecked()  # type: ignore[union-attr]

    mid = QPoint(red.width() // 2, red.height() // 2)  # the image's middle: inside the volume

    def drag(a: QPoint, b: QPoint) -> None:
        qtbot.mousePress(red, Qt.MouseButton.LeftButton, pos=mid + a)
        qtbot.mouseMove(red, mid + (a + b) / 2)
        qtbot.mouseRelease(red, Qt.MouseButton.LeftButton, pos=mid + b)

    drag(QPoint(-50, 0), QPoint(50, 0))
    assert win.model is not None and win.model.session.evidence() == []  # the long axis waits for the short
    drag(QPoint(8, -25), QPoint(-8, 25))  # slanted: only its part across the long axis counts
    [bi] = win.model.session.evidence()
    long_v = np.subtract(bi["long"]["b"]["ras"], bi["long"]["a"]["ras"])
    short_v = np.subtract(bi["short"]["b"]["ras"], bi["short"]["a"]["ras"])
    assert bi["kind"] == "bidirectional" and abs(float(long_v @ short_v)) < 1e-2 * bi["long_mm"] * bi["short_mm"]
    assert bi["long_mm"] == pytest.approx(2 * bi["short_mm"], rel=0.05)  # 100 px along, 50 px across
    win.shape_actions["ellipse"].setChecked(True)  # type: ignore[attr-defined]
    drag(QPoint(-20, -10), QPoint(20, 10))
    ellipse = win.model.session.evidence()[-1]
    assert ellipse["kind"] == "ellipse" and ellipse["voxels"] > 0
    assert ellipse["radius_x_mm"] == pytest.approx(2 * ellipse["radius_y_mm"], rel=0.05)
    assert ellipse["values"]["min"] <= ellipse["values"]["mean"] <= ellipse["values"]["max"]
    win.model.undo()
    assert [e["kind"] for e in win.model.session.evidence()] == ["bidirectional"]
    win.close()
