"""The desktop's PACS browser (pytest-qt, offscreen) against a private Orthanc: search by patient ID lists the
study and its series; a double-click opens the series in the window with its origin traced, its slices painted
as they arrive before the session opens."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtWidgets import QLabel

from copilot.gui import pacs_arriving
from copilot.gui.app import MainWindow
from copilot.pacs.client import PacsClient
from copilot.pacs.orthanc import LocalOrthanc, missing
from copilot.pacs.sample import SAMPLE_PATIENT, write_ct_series
from copilot.panel.studies import RecentStudies
from copilot.trace.study_ref import study_record

pytestmark = [pytest.mark.gui, pytest.mark.skipif(missing() is not None, reason=str(missing()))]


def test_pacs_browser_searches_and_opens(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LocalOrthanc() as pacs:
        monkeypatch.setenv("MEDCOPILOT_PACS_USER", pacs.user)
        monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", pacs.password)
        monkeypatch.setenv("MEDCOPILOT_PACS_CACHE", str(tmp_path / "cache"))
        monkeypatch.setenv("MEDCOPILOT_PACS_URL", pacs.dicomweb)
        datasets = write_ct_series(tmp_path / "ct")
        PacsClient(pacs.dicomweb).store(datasets, datasets[0].StudyInstanceUID)
        win = MainWindow(recent=RecentStudies(tmp_path / "recent.json"))
        win.quiet = True
        qtbot.addWidget(win)
        dock = win.show_pacs_browser()
        assert dock.server.text() == pacs.dicomweb
        dock.patient_id.setText("nobody")
        assert dock.search() == 0
        dock.patient_id.setText(SAMPLE_PATIENT["PatientID"])
        dock.modality.setText("CT")
        assert dock.search() == 1
        study = dock.results.topLevelItem(0)
        assert study.childCount() == 1 and study.child(0).text(2) == "8"
        painted: list[tuple[int, int, bool]] = []
        plain = pacs_arriving.paint

        def paint(label: Any, stack: Any, area: Any) -> bool:
            painted.append((stack.count, stack.total, win.model is None))
            return plain(label, stack, area)

        monkeypatch.setattr(pacs_arriving, "paint", paint)
        retrieve = PacsClient.retrieve_instance

        def slow(self: PacsClient, *args: Any) -> None:  # a distant PACS: each instance takes a while
            time.sleep(0.1)
            retrieve(self, *args)

        monkeypatch.setattr(PacsClient, "retrieve_instance", slow)
        monkeypatch.setenv("MEDCOPILOT_PACS_WORKERS", "4")
        opened: list[str] = []
        dock.open_url = lambda url: opened.append(url) or win.open_study_path(url, trace_dir=tmp_path / "t")
        dock.results.itemDoubleClicked.emit(study.child(0), 0)
        ds = datasets[0]
        assert opened == [f"{pacs.dicomweb}/studies/{ds.StudyInstanceUID}/series/{ds.SeriesInstanceUID}"]
        assert win.model is not None and win.model.session.kind == "radiology"
        shown = [count for count, total, before in painted if count and total == 8 and before]
        assert shown and shown == sorted(shown)  # slices painted as they arrived, before the session existed
        assert win.findChild(QLabel, "pacs-arriving") is None or win.findChild(QLabel, "pacs-arriving").isHidden()
        assert study_record(tmp_path / "t")["case_inputs"]["origin"]["url"] == opened[0]  # the owner-only sidecar
        monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", "wrong")
        assert dock.search() == -1 and "HTTP 401" in dock.status.text()
        win.close()


def test_a_pacs_url_shows_its_first_slice_at_start_up_and_the_viewer_takes_its_retrieval_over(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot.gui import startup

    with LocalOrthanc() as pacs:
        monkeypatch.setenv("MEDCOPILOT_PACS_USER", pacs.user)
        monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", pacs.password)
        monkeypatch.setenv("MEDCOPILOT_PACS_CACHE", str(tmp_path / "cache"))
        datasets = write_ct_series(tmp_path / "src", n=6)
        PacsClient(pacs.dicomweb).store(datasets, datasets[0].StudyInstanceUID)
        ds = datasets[0]
        url = f"{pacs.dicomweb}/studies/{ds.StudyInstanceUID}/series/{ds.SeriesInstanceUID}"
        monkeypatch.setattr(startup, "_state", {**startup._state, "watcher": object()})  # no exit-on-paint filter
        startup.show_splash()
        try:
            assert startup.show_first_image(url)  # the retrieval began here, its first slice painted
            shown = startup._state["image"]
            assert shown is not None and not shown.isHidden() and shown.pixmap().width() == 512
            started = startup.pacs_study(url)
            assert started is not None and startup.pacs_study(url) is None  # handed over once
            assert startup.pacs_study("http://elsewhere/dicom-web/studies/1") is None
            assert started.wait(60).path.is_dir() and started.stack is not None and started.stack.count == 6
        finally:
            startup.close_splash()
