"""The desktop's patient banner (pytest-qt, offscreen): the bar over the views and the window title name the patient
and study of a DICOM folder, and opening another patient's study replaces both, visibly (amber, a status line)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from copilot.gui.app import MainWindow
from copilot.gui.patient_bar import CHANGED_STYLE, STYLE
from copilot.panel.studies import RecentStudies
from tests.test_patient_banner import dicom_study

pytestmark = pytest.mark.gui


def test_banner_names_the_patient_and_changes_with_the_study(qtbot, tmp_path: Path) -> None:
    dicom_study(tmp_path / "first")
    dicom_study(tmp_path / "second", PatientName="Okonkwo^Adaeze", PatientID="ZZ-104", StudyDescription="Abdomen")
    window = MainWindow()
    window.quiet = window.no_dialogs = True
    window.recent = RecentStudies(Path(tempfile.mkdtemp()) / "recent.json")
    qtbot.addWidget(window)
    window.resize(1300, 800)
    window.show()
    qtbot.waitExposed(window)
    assert window.open_path(tmp_path / "first")
    bar = window.patient_bar
    assert window.windowTitle() == "MedCopilot — Brackwater, Henrietta Q — Thorax staging 2024-06-11 — #3 chest axial"
    assert "<b>Brackwater, Henrietta Q</b>" in bar.label.text() and "HX-558201" in bar.label.text()
    assert "1961-03-14 (63 y)" in bar.label.text() and bar.label.styleSheet() == STYLE
    assert bar.isVisible() and bar.label.isVisible()
    qtbot.waitUntil(lambda: bar.label.width() > 0.8 * window.width(), timeout=3000)  # the whole row
    assert window.open_path(tmp_path / "second")
    assert window.windowTitle().startswith("MedCopilot — Okonkwo, Adaeze — Abdomen 2024-06-11")
    assert "<b>Okonkwo, Adaeze</b>" in bar.label.text() and "Brackwater" not in bar.label.text()
    assert bar.label.styleSheet() == CHANGED_STYLE  # amber until it settles
    qtbot.waitUntil(lambda: window.statusBar().currentMessage().startswith("Now open: Okonkwo, Adaeze · ID ZZ-104"))
    qtbot.waitUntil(lambda: bar.label.styleSheet() == STYLE, timeout=6000)
