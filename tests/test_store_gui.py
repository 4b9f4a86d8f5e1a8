"""The desktop's File → Store to PACS / Export (pytest-qt, offscreen) against a private Orthanc: the dialog lists
the report with the question and answer and the PACS it goes to, nothing is stored before Store is pressed, and
then the report is on the PACS; `gui STUDY_URL --series N` opens that series of the PACS study."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication

from copilot.gui.app import MainWindow
from copilot.gui.store_dialog import StoreDialog
from copilot.pacs.client import PacsClient
from copilot.pacs.orthanc import LocalOrthanc, missing
from copilot.pacs.sample import write_ct_series
from copilot.panel.studies import RecentStudies

pytestmark = pytest.mark.gui


@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_store_dialog_asks_then_stores_and_a_url_opens_with_series(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot.gui import app

    with LocalOrthanc() as pacs:
        monkeypatch.setenv("MEDCOPILOT_PACS_USER", pacs.user)
        monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", pacs.password)
        monkeypatch.setenv("MEDCOPILOT_PACS_CACHE", str(tmp_path / "cache"))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
        datasets = write_ct_series(tmp_path / "ct")
        study = datasets[0].StudyInstanceUID
        client = PacsClient(pacs.dicomweb)
        client.store(datasets, study)
        url = f"{pacs.dicomweb}/studies/{study}"
        shot = tmp_path / "shot.png"  # the URL with --series 3 (the CT's series number) opens, no `http:/` mangling
        assert app.main(url, screenshot=str(shot), series="3", trace_dir=str(tmp_path / "t0")) == 0 and shot.is_file()

        win = MainWindow(recent=RecentStudies(tmp_path / "recent.json"))
        win.quiet = True
        qtbot.addWidget(win)
        assert win.open_path(url, trace_dir=tmp_path / "t") and win.model is not None
        assert win.model.act("record_key_slice", {"view": "red", "offset": 15.0, "label": "block"}).ok
        win.model.answered.append(("Is there a bright block?", "Yes, in the key slice."))
        seen: list[str] = []

        def press_store() -> None:
            dialog = QApplication.activeModalWidget()
            assert isinstance(dialog, StoreDialog)
            seen.append(dialog.text.toPlainText())
            seen.append(",".join(sorted({s["modality"] for s in client.series(study)})))  # nothing stored yet
            dialog.store_button.click()

        QTimer.singleShot(200, press_store)
        action = next(a for a in win.findChildren(QAction) if a.text().startswith("Store to PACS"))
        action.trigger()
        assert seen and f"→ {pacs.dicomweb}" in seen[0] and "question: «Is there a bright block?»" in seen[0]
        assert "answer: «Yes, in the key slice.»" in seen[0] and seen[1] == "CT"
        assert {s["modality"] for s in client.series(study)} == {"CT", "SR"}
        win.close()


def test_the_series_picker_lists_a_segmentation_apart_and_on_its_series(qtbot, tmp_path: Path) -> None:
    """A CT folder holding a SEG made on it: the picker lists one series, named with its SEG, and the SEG below as a
    derived result (never a series to open)."""
    from copilot.gui.series_dialog import SeriesDialog
    from copilot.panel.derived import study_derived
    from copilot.panel.studies import dicom_series, open_study, study_for

    write_ct_series(tmp_path / "ct")
    session = open_study(study_for(str(tmp_path / "ct")), tmp_path / "t", track="B")
    session.allow_store = (str(tmp_path / "t"),)  # headless: files under the trace folder
    volume = str(session.snapshot()["volumes"][0]["name"])
    assert session.call("segment_threshold", {"volume": volume, "output_segment": "block", "lower": 1100,
                                              "upper": 5000}).ok  # fmt: skip
    assert session.call("export_dicom_seg", {"segment": "block", "output_name": "block_seg"}).ok
    session.close()
    (tmp_path / "t" / "derived" / "block_seg.dcm").rename(tmp_path / "ct" / "seg.dcm")
    found = dicom_series(tmp_path / "ct")
    dialog = SeriesDialog(found, None, study_derived(tmp_path / "ct"))
    qtbot.addWidget(dialog)
    assert [s.modality for s in found] == ["CT"] and dialog.list.count() == 1
    assert dialog.list.item(0).text().endswith("· with SEG block_seg")
    assert dialog.derived.text().startswith("Derived results (not images): SEG #") and not dialog.derived.isHidden()


def test_a_pacs_study_that_cannot_open_is_named_by_its_study(qtbot, tmp_path: Path) -> None:
    """A cached PACS study whose series is incomplete: the refusal names the patient and study, not the hashed
    cache folder."""
    import json

    folder = tmp_path / "0123456789abcdef"
    write_ct_series(folder / "fedcba9876543210")
    root = "http://pacs.invalid/dicom-web"
    origin = {"dicomweb": root, "study": "1.2.3", "url": f"{root}/studies/1.2.3"}
    (folder / "origin.json").write_text(json.dumps(origin))
    (folder / "fedcba9876543210" / "origin.json").write_text(json.dumps(
        {**origin, "series": "1.2.3.4", "url": f"{root}/studies/1.2.3/series/1.2.3.4", "complete": False,
         "instances": 8, "expected": 9}))  # fmt: skip
    win = MainWindow(recent=RecentStudies(tmp_path / "recent.json"))
    win.quiet = True
    qtbot.addWidget(win)
    assert not win.open_path(folder)
    text = win.readout.text()
    assert "Testpatient" in text and "pacs_incomplete" not in text and "0123456789abcdef" not in text, text
    assert "1 of 9 instances missing" in text
    win.close()
