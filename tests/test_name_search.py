"""One search everywhere: a patient's name matched in the forms people type it ("Family, Given", "Given Family",
DICOM's "Family^Given") by `pacs search` and by the desktop's PACS browser, which offers every filter of `pacs
search` (name, ID, accession, description, modality, dates, a page at a time) and lists full rows with the
patient's name and the study date — against a private Orthanc where one is installed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydicom
import pytest

from copilot.cli import main
from copilot.pacs.query import name_forms, study_filters


def test_the_forms_of_a_typed_name() -> None:
    assert name_forms("Brackenridge, Eleanor") == ["Brackenridge?Eleanor*"]
    assert name_forms("van der Berg, Anna Maria") == ["van?der?Berg?Anna?Maria*"]
    assert name_forms("Brackenridge^Eleanor") == ["Brackenridge?Eleanor*"]
    assert name_forms("Eleanor Brackenridge") == ["Eleanor?Brackenridge*", "Brackenridge?Eleanor*"]
    assert name_forms("Brack") == ["Brack*"]
    assert name_forms("Brack*n^E?") == ["Brack*n?E?"]  # the user's own wildcards as given
    assert study_filters(patient_name="Brackenridge, Eleanor")["PatientName"] == "Brackenridge?Eleanor*"


@pytest.fixture()
def orthanc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[pydicom.Dataset]]]:
    """A private Orthanc holding two CT studies of two patients (names, IDs, accessions, descriptions apart)."""
    from copilot.pacs.client import PacsClient
    from copilot.pacs.orthanc import LocalOrthanc, missing
    from copilot.pacs.sample import write_ct_series

    if missing() is not None:
        pytest.skip(str(missing()))
    with LocalOrthanc() as pacs:
        monkeypatch.setenv("MEDCOPILOT_PACS_USER", pacs.user)
        monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", pacs.password)
        monkeypatch.setenv("MEDCOPILOT_PACS_URL", pacs.dicomweb)
        monkeypatch.setenv("MEDCOPILOT_PACS_CACHE", str(tmp_path / "cache"))
        stored = []
        for n, (name, accession) in enumerate((("Brackenridge^Eleanor", "ACC-1"), ("Quill^Ambrose", "ACC-2"))):
            datasets = write_ct_series(tmp_path / f"ct{n}", n=2)
            for ds in datasets:
                ds.PatientName, ds.PatientID, ds.AccessionNumber = name, f"ID-{n}", accession
                ds.StudyDescription = "CT chest" if n == 0 else "CT abdomen"
            PacsClient(pacs.dicomweb).store(datasets, datasets[0].StudyInstanceUID)
            stored.append(datasets[0])
        yield pacs, stored


def test_pacs_search_finds_a_name_as_typed(orthanc: Any, capsys: pytest.CaptureFixture[str]) -> None:
    pacs, stored = orthanc
    for typed in ("Brackenridge, Eleanor", "Eleanor Brackenridge", "Brackenridge^Eleanor", "Brackenridge"):
        assert main(["pacs", "search", pacs.dicomweb, "--patient-name", typed]) == 0
        out = capsys.readouterr().out
        assert stored[0].StudyInstanceUID in out and stored[1].StudyInstanceUID not in out, typed
        assert out.rstrip().endswith("1 study"), out
    assert main(["pacs", "search", pacs.dicomweb, "--patient-name", "Eleanor Quill"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("0 studies")


@pytest.mark.gui
@pytest.mark.usefixtures("orthanc")  # the browser's server: MEDCOPILOT_PACS_URL
def test_the_browser_offers_every_filter_and_pages(qtbot: Any, tmp_path: Path) -> None:
    pytest.importorskip("PySide6")
    pytest.importorskip("pytestqt")
    from copilot.gui.app import MainWindow
    from copilot.panel.studies import RecentStudies

    win = MainWindow(recent=RecentStudies(tmp_path / "recent.json"))
    win.quiet = True
    qtbot.addWidget(win)
    dock = win.show_pacs_browser()
    dock.patient_name.setText("Brackenridge, Eleanor")
    assert dock.search() == 1
    row = dock.results.topLevelItem(0)
    assert [row.text(c) for c in range(5)] == ["Brackenridge, Eleanor · CT chest", "2024-06-11", "", "ID-0", "ACC-1"]
    dock.patient_name.clear()
    for field, value in ((dock.accession, "ACC-2"), (dock.description, "abdomen"), (dock.patient_id, "ID-1")):
        field.setText(value)
        assert dock.search() == 1 and dock.results.topLevelItem(0).text(3) == "ID-1", value
        field.clear()
    dock.date.setText("2024-06-01-2024-06-30")
    dock.modality.setText("CT")
    dock.limit.setValue(1)
    assert dock.search() == 1 and dock.next_button.isEnabled() and not dock.previous_button.isEnabled()
    first = dock.results.topLevelItem(0).text(3)
    dock.next_button.click()
    assert dock.results.topLevelItemCount() == 1 and dock.results.topLevelItem(0).text(3) != first
    assert dock.previous_button.isEnabled() and not dock.next_button.isEnabled()
    assert "from number 2" in dock.status.text()
    win.close()
