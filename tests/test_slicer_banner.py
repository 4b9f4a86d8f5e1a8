"""The patient banner in the hosts' panels: Slicer's (from what its DICOM import filed in the subject hierarchy,
shown by the module's own PanelView in its .ui) and QuPath's (a DICOM whole-slide file's headers; a plain slide
names no patient)."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

if find_spec("slicer_core") is None:  # present-or-not without importing it at collection
    pytest.skip("needs slicer-core", allow_module_level=True)
pytest.importorskip("PySide6")

from copilot.host.panel import panel_state
from copilot.host.qupath import PathologyHost
from copilot.host.slicer import SlicerHost
from tests.test_patient_banner import dicom_study
from tests.test_slicer_host import _user_scene
from tests.test_slicer_panel import _load_panel


def test_slicer_panel_shows_the_patient_of_the_scene(qtbot: Any, tmp_path: Path) -> None:
    from MedCopilotLib.panel_view import PanelView

    s, _node = _user_scene(tmp_path)
    host = SlicerHost.adopt(s.scene, s.app_logic, tmp_path / "trace")
    try:
        assert host.banner.patient == "DOE, JANE"
        assert host.banner.fields == [("ID", "PAT-88412"), ("Born", "1961-04-12 (62 y)"), ("Study", "2024-01-02"),
                                      ("Modality", "MR")]  # fmt: skip
        widget, ui = _load_panel()
        qtbot.addWidget(widget)
        view = PanelView(ui)
        view.apply(panel_state(None))
        assert ui.patientLabel.text().startswith("No patient details")
        view.apply(panel_state(host.conversation, host.inventory_text(), "", banner=host.banner.line))
        assert ui.patientLabel.text() == "DOE, JANE · ID PAT-88412 · Born 1961-04-12 (62 y) · Study 2024-01-02 · " \
            "Modality MR"
        assert ui.inventoryLabel.text() == "MR series 3 (MR)"  # what the model knows stays as it was
    finally:
        host.close()


def test_qupath_banner_reads_a_dicom_slide_and_says_when_a_file_names_no_patient(tmp_path: Path) -> None:
    dicom_study(tmp_path / "wsi")
    first = sorted((tmp_path / "wsi").iterdir())[0]
    shown = PathologyHost.__new__(PathologyHost)
    shown.image_facts = {"path": f"file:{first}", "name": "slide 1"}
    assert shown.banner.patient == "Brackwater, Henrietta Q" and ("ID", "HX-558201") in shown.banner.fields
    plain = tmp_path / "slide.svs"
    plain.write_bytes(b"not dicom")
    other = PathologyHost.__new__(PathologyHost)
    other.image_facts = {"path": str(plain), "name": "slide.svs"}
    assert other.banner.patient == "" and other.banner.line.startswith("no patient details")
    assert other.banner.title == "MedCopilot — slide.svs"


def test_the_slicer_panel_sends_none_of_the_banner_to_the_model(tmp_path: Path) -> None:
    """A question typed with the patient's name, ID and birth date: every request arrives scrubbed of them."""
    from copilot.agent.settings import AgentSettings
    from tests.fake_openai import FakeOpenAI

    fake = FakeOpenAI([{"content": "No lesion."}])
    s, _node = _user_scene(tmp_path)
    settings = AgentSettings(base_url=fake.base_url, model="m", max_retries=0, timeout_s=10)
    host = SlicerHost.adopt(s.scene, s.app_logic, tmp_path / "trace", settings=lambda: settings)
    try:
        host.conversation.approve_each = False
        host.conversation.ask("Is this Jane Doe (PAT-88412, born 12/04/1961 — 1961-04-12) the same as last year?")
        assert host.conversation.wait(60)
    finally:
        fake.stop()
        host.close()
    sent = b"".join(fake.bodies).decode()
    assert fake.requests and "[redacted]" in sent
    for word in ("Jane", "JANE", "Doe", "DOE", "PAT-88412", "1961-04-12", "12/04/1961", "19610412"):
        assert word not in sent, word


def test_a_scene_holding_two_patients_is_not_adopted(tmp_path: Path) -> None:
    from copilot.errors import HandlerError
    from copilot.slicer_backend.mrml import mrml
    from tests.test_slicer_host import _write_volume

    s, _node = _user_scene(tmp_path)
    path = tmp_path / "other.nrrd"
    _write_volume(path)
    volumes = mrml().vtkSlicerVolumesLogic()
    volumes.SetMRMLScene(s.scene)
    node = volumes.AddArchetypeVolume(str(path), "other")
    sh = s.scene.GetSubjectHierarchyNode()
    patient = sh.CreateSubjectItem(sh.GetSceneItemID(), "QUIXLEY^JOHNATHAN")
    sh.SetItemAttribute(patient, "DICOM.PatientName", "QUIXLEY^JOHNATHAN")
    sh.SetItemAttribute(patient, "DICOM.PatientID", "MRN-7734921")
    study = sh.CreateStudyItem(patient, "CT CHEST")
    series = sh.GetItemByDataNode(node) or sh.CreateItem(study, node)
    sh.SetItemParent(series, study)
    sh.SetItemAttribute(series, "DICOM.Modality", "CT")
    with pytest.raises(HandlerError, match="different patients") as refused:
        SlicerHost.adopt(s.scene, s.app_logic, tmp_path / "trace")
    assert refused.value.code == "other_patient" and "QUIXLEY" not in refused.value.message
