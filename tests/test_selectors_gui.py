"""The toolbar's selectors follow the scene (pytest-qt, offscreen): after the hanging protocol, an agent's calls, a
right-drag of the window and each undo, the foreground box, the opacity box and the W/L box read what the views are
drawn with — the DICOM's own window by its figures, a dragged one as "custom W/L" — and touching the opacity box
starts from what is shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydicom
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QPoint, Qt

from copilot.gui import reading
from copilot.gui.app import MainWindow
from copilot.panel.selectors import selectors, wl_words
from tests.test_reading_room import Calls
from tests.test_workstation_gui import _show

pytestmark = pytest.mark.gui


@pytest.fixture()
def petct(tmp_path: Path) -> Path:
    """A CT (#2, carrying its own window 400/40) and a PET (#3) on one grid, as a DICOM study."""
    from copilot.cases.dicom_study import write_dicom_study
    from tests.workstation_data import petct_case_pack

    study = write_dicom_study(petct_case_pack(tmp_path / "case"), tmp_path / "dicom")
    for f in sorted(study.rglob("*")):
        if f.is_file():
            ds = pydicom.dcmread(f)
            if ds.Modality == "CT":
                ds.WindowWidth, ds.WindowCenter = 400, 40
                ds.save_as(f)
    return study


def shown(win: MainWindow) -> tuple[Any, int, str]:
    """What the toolbar says: the foreground's id, the opacity in %, the W/L box's text."""
    return win.fusion_box.currentData(), win.opacity.value(), win.wl_box.currentText()


def scene(win: MainWindow) -> tuple[Any, int, str]:
    """What the views are drawn with, in the toolbar's words."""
    assert win.screen_path is not None and win.model is not None
    state = win.model.session.snapshot()
    s = selectors(state, win.screen_path.file_window())
    title = s.wl_title or win.wl_box.itemText(win.wl_box.findData(s.wl))
    return s.foreground, s.opacity_percent, title


def agree(qtbot: Any, win: MainWindow) -> tuple[Any, int, str]:
    qtbot.waitUntil(lambda: shown(win) == scene(win), timeout=10000)
    return shown(win)


def test_every_selector_reads_the_scene_after_every_kind_of_change(
    qtbot, petct: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "sessions"))
    win = MainWindow(policies={})
    win.no_dialogs = True
    _show(qtbot, win)
    assert win.open_path(petct, series_spec="2,3")
    assert win.model is not None and win.screen_path is not None
    qtbot.waitUntil(lambda: all(p.frame is not None for p in win.panes.values()), timeout=10000)
    names = {v["id"]: v["name"] for v in win.screen_path.state()["volumes"]}
    pet = next(vid for vid, name in names.items() if name == "PET AC")
    ct = next(vid for vid in names if vid != pet)
    # the hanging protocol: PET over CT at 50 %, the CT in its own window
    assert agree(qtbot, win) == (pet, 50, "DICOM 400/40")
    # the agent's calls
    calls = [("fusion", {"background_volume_ref": ct, "foreground_volume_ref": pet, "foreground_opacity": 0.3,
                         "view": "red", "size": 64}),
             ("window_preset", {"preset": "ct_lung", "view": "red", "size": 64})]  # fmt: skip
    win.model.run_episode(Calls(calls))
    assert win.model.wait(20) and win.model.status == "done"
    assert agree(qtbot, win) == (pet, 30, "CT lung")
    # a right-drag of the window
    red = win.panes["red"]
    qtbot.mousePress(red, Qt.MouseButton.RightButton, pos=QPoint(60, 60))
    qtbot.mouseRelease(red, Qt.MouseButton.RightButton, pos=QPoint(160, 80))
    d = win.model.session.snapshot()["display"][ct]
    assert d["window"] == pytest.approx(1400 * 1.5) and d["preset"] is None
    assert agree(qtbot, win) == (pet, 30, f"custom {wl_words(d['window'], d['level'])}")
    assert win.wl_box.currentText() == "custom 2100/−640"
    # touching the opacity box starts from what is shown and changes the scene by one step
    win.opacity.stepUp()
    assert win.model.session.snapshot()["foreground_opacity"] == pytest.approx(0.4)
    assert agree(qtbot, win) == (pet, 40, "custom 2100/−640")
    # undo, step by step, back to the hanging protocol's scene
    reading.undo_last(win)
    assert agree(qtbot, win) == (pet, 30, "custom 2100/−640")
    reading.undo_last(win)
    assert agree(qtbot, win) == (pet, 30, "CT lung")
    reading.undo_last(win, "agent")
    assert agree(qtbot, win) == (pet, 30, "DICOM 400/40")
    reading.undo_last(win, "agent")
    assert agree(qtbot, win) == (pet, 50, "DICOM 400/40")
    # choosing "none" as the foreground, and a preset from the box
    win.fusion_box.setCurrentIndex(win.fusion_box.findData(None))
    win.set_fusion(None)
    assert agree(qtbot, win)[0] is None
    win.set_wl_preset("ct_bone")
    assert agree(qtbot, win)[2] == "CT bone" and win.wl_box.findData("custom") < 0
