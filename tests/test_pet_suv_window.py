"""PET read as PET: its window as an SUV range (a preset such as 0–6, or typed), set by an audited `wl` on the
stored values and read back in SUV; the PET box follows the scene; the foreground's colour bar in SUV with its
window under it, painted in the slice panes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from copilot.panel.pet_window import colour_bar, parse_range, range_words, suv_factor, suv_range, suv_window


@pytest.fixture(scope="module")
def petct(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CT (#2) and a PET in Bq/ml with its SUV tags (#3) on one grid, as a DICOM study."""
    from copilot.cases.dicom_study import write_dicom_study
    from tests.workstation_data import petct_case_pack

    root = tmp_path_factory.mktemp("petct")
    return write_dicom_study(petct_case_pack(root / "case"), root / "dicom")


def test_suv_ranges_are_read_as_typed_and_refused_by_name() -> None:
    assert parse_range("0-6") == (0.0, 6.0) and parse_range("SUV 2.5–8") == (2.5, 8.0)
    assert parse_range("1 to 4") == (1.0, 4.0) and parse_range(" 0 10 ") == (0.0, 10.0)
    for bad in ("6-0", "-1-4", "abc", "", "0-5000"):
        with pytest.raises(ValueError, match="SUV range"):
            parse_range(bad)
    assert range_words(0.0, 6.0) == "SUV 0–6" and range_words(2.5, 8.0) == "SUV 2.5–8"


def test_an_suv_window_is_the_stored_values_window_and_reads_back(petct: Path) -> None:
    from copilot.engine.volume.loading import load_volume
    from copilot.panel.studies import dicom_series

    ct, pet = (load_volume(s.folder) for s in dicom_series(petct))
    assert suv_factor(ct) is None
    factor = suv_factor(pet)
    assert factor is not None and factor > 0
    window, level = suv_window(factor, 0.0, 6.0)
    assert window * factor == pytest.approx(6.0) and level * factor == pytest.approx(3.0)
    assert suv_range(factor, window, level) == pytest.approx((0.0, 6.0))
    bar = colour_bar(pet, {"window": window, "level": level, "colormap": "pet_heat"}, "PET AC")
    assert bar is not None and bar.title == "PET AC SUV 0–6"
    assert [t for _, t in bar.labels] == ["0", "3", "6"]
    assert bar.colours[0] == (0, 0, 0) and bar.colours[-1][0] > 200  # the heat map: black to bright
    assert colour_bar(ct, {"window": 400, "level": 40}, "CT") is None


@pytest.mark.gui
def test_the_pet_box_windows_the_pet_in_suv_and_the_panes_draw_its_colour_bar(
    qtbot: Any, petct: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    pytest.importorskip("PySide6")
    pytest.importorskip("pytestqt")
    from PySide6.QtCore import Qt

    from copilot.gui.app import MainWindow
    from tests.test_workstation_gui import _show

    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "sessions"))
    win = MainWindow(policies={})
    win.no_dialogs = True
    _show(qtbot, win)
    assert win.open_path(petct, series_spec="2,3") and win.model is not None and win.screen_path is not None
    qtbot.waitUntil(lambda: all(p.frame is not None for p in win.panes.values()), timeout=10000)
    qtbot.waitUntil(lambda: win.pet_bar is not None, timeout=5000)
    assert all(a.isVisible() for a in win.pet_actions)
    state = win.model.session.snapshot()
    pet = state["foreground_volume"]
    # the PET/CT hanging protocol shows the PET in SUV 0–6, by a system call
    qtbot.waitUntil(lambda: win.pet_bar is not None and win.pet_bar.title == "PET AC SUV 0–6", timeout=5000)
    assert win.pet_box.currentText() == "SUV 0–6"
    assert [(e.actor, e.args["volume_id"]) for e in win.model.timeline if e.handler == "wl"] == [("system", pet)]
    d = win.model.session.snapshot()["display"][pet]
    win.pet_box.textActivated.emit("SUV 0–10")  # a preset chosen
    calls = [e for e in win.model.timeline if e.handler == "wl"]
    assert calls[-1].actor == "clinician" and calls[-1].args["volume_id"] == pet
    qtbot.waitUntil(lambda: win.pet_bar is not None and win.pet_bar.title == "PET AC SUV 0–10", timeout=5000)
    assert win.model.session.snapshot()["display"][pet]["window"] == pytest.approx(d["window"] * 10 / 6)
    edit = win.pet_box.lineEdit()
    assert edit is not None
    edit.setText("2-8")
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: win.pet_bar is not None and win.pet_bar.title == "PET AC SUV 2–8", timeout=5000)
    assert win.model.session.snapshot()["display"][pet]["window"] == pytest.approx(d["window"])  # 6 SUV wide again
    before = win.model.session.snapshot()["display"][pet]
    win.set_pet_window("8-2")
    assert win.model.session.snapshot()["display"][pet] == before and "SUV range" in win.statusBar().currentMessage()
    red = win.panes["red"]
    red.repaint()
    image = red.grab().toImage()
    h = red.height()
    top = h - max(40.0, min(140.0, h * 0.3)) - 30.0
    colour = image.pixelColor(int(red.width() - 41), int(top + 3))  # the bar's top: the map's brightest
    assert colour.red() > 200 and colour.blue() < colour.red()
