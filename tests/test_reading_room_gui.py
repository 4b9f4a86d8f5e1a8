"""The reading room in the window (pytest-qt, offscreen): slice keys, Ctrl+wheel zoom, the ruler drawn with the
mouse and listed as the clinician's evidence, Edit → Undo, a prior opened side by side and scrolled together, the
approval said in words with its own reason field, the dock no wider than its content needs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QPoint, Qt

from copilot.gui import reading
from copilot.gui.app import MainWindow
from copilot.panel.prior import focus_point
from tests.test_reading_room import Calls, phantom
from tests.test_workstation_gui import _show

pytestmark = pytest.mark.gui


@pytest.fixture()
def window(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MainWindow:
    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "sessions"))
    win = MainWindow()  # the shipped policies: the long model entry included
    win.no_dialogs = True
    _show(qtbot, win)
    assert win.open_path(phantom(tmp_path / "now" / "head.nii.gz"))
    qtbot.waitUntil(lambda: all(p.frame is not None for p in win.panes.values()), timeout=10000)
    return win


def _offset(win: MainWindow, view: str = "red") -> float:
    assert win.model is not None
    return float(win.model.session.snapshot()["views"][view]["offset"])


def test_keys_scroll_ctrl_wheel_zooms_and_undo_takes_back(qtbot, window: MainWindow) -> None:
    red = window.panes["red"]
    start = _offset(window)
    qtbot.keyClick(red, Qt.Key.Key_Up)
    qtbot.keyClick(red, Qt.Key.Key_PageUp)
    assert _offset(window) == pytest.approx(start + 11 * 2.0)
    qtbot.keyClick(red, Qt.Key.Key_Home)
    low = _offset(window)
    qtbot.keyClick(red, Qt.Key.Key_End)
    assert _offset(window) > low
    reading.undo_last(window)
    assert _offset(window) == pytest.approx(low)
    assert window.model is not None
    fov = window.model.session.snapshot()["views"]["red"]["fov_mm"][0]
    assert window.tools is not None and red.frame is not None
    window.tools.zoom_at("red", red.frame, (50.0, 50.0), 1.25)
    assert window.model.session.snapshot()["views"]["red"]["fov_mm"][0] == pytest.approx(fov / 1.25)


def test_the_ruler_drawn_with_the_mouse_is_the_clinicians_evidence(qtbot, window: MainWindow) -> None:
    assert window.ruler_action is not None
    window.ruler_action.setChecked(True)
    red = window.panes["red"]
    qtbot.mousePress(red, Qt.MouseButton.LeftButton, pos=QPoint(40, 100))
    qtbot.mouseMove(red, QPoint(90, 100))
    qtbot.mouseRelease(red, Qt.MouseButton.LeftButton, pos=QPoint(140, 100))
    assert window.model is not None
    [ev] = window.model.session.evidence()
    assert ev["kind"] == "distance" and ev["label"] == "ruler" and ev["distance_mm"] > 0
    qtbot.waitUntil(lambda: window.panel.evidence.count() == 1, timeout=5000)
    window.model.undo()
    assert window.model.session.evidence() == []


def test_a_prior_opens_side_by_side_and_scrolls_with_the_current(qtbot, window: MainWindow, tmp_path: Path) -> None:
    prior = phantom(tmp_path / "prior" / "head.nii.gz", (2, 0, -1))
    assert reading.open_prior(window, prior, approve=True)
    assert window.layout_name == reading.PRIOR_LAYOUT and list(window.panes) == ["red", "prior:red"]
    qtbot.waitUntil(lambda: window.panes["prior:red"].frame is not None, timeout=10000)
    qtbot.keyClick(window.panes["prior:red"], Qt.Key.Key_Down)  # a key on the prior scrolls both
    assert window.model is not None and window.prior is not None
    here, there = focus_point(window.model.session), focus_point(window.prior.prior)
    assert np.abs(there - window.prior.to_prior(here)).max() < 0.5
    reading.close_prior(window)
    assert window.prior is None


def test_an_approval_is_said_in_words_and_the_reason_has_its_own_field(qtbot, window: MainWindow) -> None:
    model = window.model
    assert model is not None
    model.set_approve_mode(True)
    model.run_episode(Calls([("set_slice_offset", {"view": "red", "offset": -12.5, "size": 64})]))
    qtbot.waitUntil(lambda: model.pending is not None, timeout=5000)
    window.panel.refresh()
    assert window.panel.proposal.text() == "The agent asks to set red slice to S −12.5 mm."
    window.panel.instruction.setText("a question, not a reason")
    window.panel.reason.setText("wrong level")
    window.panel.reject_button.click()
    assert model.wait(5)
    rejected = [e for e in model.timeline if e.status == "rejected"]
    assert rejected and rejected[0].error == "wrong level"
    assert window.panel.instruction.text() == "a question, not a reason"


def test_the_dock_stays_narrow_with_long_policy_names(qtbot, window: MainWindow) -> None:
    assert window.dock.width() < 420  # the views keep the room
    assert min(window.panes["red"].device_size()) >= 300 or window.layout_name != "three_up"


def test_a_clinicians_pet_ct_study_opens_by_its_hanging_protocol(qtbot, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import json

    from copilot.cases.dicom_study import write_dicom_study
    from copilot.medflow import make_cases

    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "sessions"))
    study = write_dicom_study(make_cases("lung_petct", 1, 1, tmp_path / "cases")[0], tmp_path / "dicom")
    win = MainWindow(policies={})
    win.no_dialogs = True
    _show(qtbot, win)
    assert win.open_path(study, series_spec="2,4")
    assert win.screen_path is not None and win.model is not None
    state = win.screen_path.state()
    names = {v["id"]: v["name"] for v in state["volumes"]}
    assert names[state["foreground_volume"]] == "PET AC" and names[state["background_volume"]] == "CT diagnostic"
    assert win.layout_name == "three_up"
    trace = Path(str(win.model.session.trace_dir)) / "trace.jsonl"
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [e["rule"] for e in events if e["type"] == "hanging_protocol"] == ["PET/CT"]
    fusion = [e for e in events if e.get("handler") == "fusion"]
    assert fusion and fusion[0]["actor"] == "system"


def test_a_prior_of_another_patient_is_refused_unless_accepted_and_its_pane_names_it(
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    import pydicom
    import SimpleITK as sitk

    from tests.workstation_data import write_dicom_series

    prior = tmp_path / "other" / "series"
    data = sitk.GetArrayFromImage(sitk.ReadImage(str(phantom(tmp_path / "p" / "head.nii.gz", (2, 0, -1)))))
    write_dicom_series(prior, data.astype(np.int16), "2.25.5544332211", "CT head", 3)
    for f in prior.iterdir():
        ds = pydicom.dcmread(f)
        ds.PatientName, ds.PatientID, ds.StudyDate, ds.StudyDescription = "QUIXLEY^JOHN", "MRN-77", "20240812", "CT"
        ds.save_as(f)
    assert not reading.open_prior(window, prior, approve=True, other_patient=False)  # the current names no patient
    assert window.prior is None and "another patient" in window.readout.text()
    assert reading.open_prior(window, prior, approve=True, other_patient=True)
    assert window.prior_caption == "PRIOR 2024-08-12 · CT"
    assert window.model is not None
    checks = [e for e in window.model.session.trace_events() if e.get("type") == "patient_check"]
    assert [c["decision"] for c in checks] == ["refused", "accepted by the clinician"]
    reading.close_prior(window)


def test_series_of_two_patients_open_together_only_through_the_dialog(
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    from tests.test_same_patient import _two_patients

    folder = _two_patients(tmp_path / "mixed")
    before = window.model
    assert not window.open_path(folder, series_spec="1,2")  # no dialog here: refused
    assert window.model is before and "different patients" in window.statusBar().currentMessage()


def test_every_pane_of_a_dicom_study_names_its_date_and_description(
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    from tests.test_patient_banner import dicom_study

    assert window.study_caption == ""  # a volume file names no study
    dicom_study(tmp_path / "ct")
    assert window.open_path(tmp_path / "ct")
    assert window.study_caption == "2024-06-11 · Thorax staging"
    qtbot.waitUntil(lambda: all(p.frame is not None for p in window.panes.values()), timeout=10000)
    window.panes["red"].grab()  # painted with its caption


def test_the_store_dialog_names_the_patient_as_the_banner_does(qtbot) -> None:
    from copilot.gui.store_dialog import StoreDialog
    from copilot.panel.store import StorePlan

    dialog = StoreDialog(StorePlan(problems=["no evidence yet"]), None, "QUIXLEY, JOHNATHAN · ID MRN-7734921")
    qtbot.addWidget(dialog)
    assert dialog.patient.text() == "Patient: QUIXLEY, JOHNATHAN · ID MRN-7734921"
