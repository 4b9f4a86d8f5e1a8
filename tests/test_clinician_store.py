"""The clinician stores results: `/store` in `chat` and the desktop's Store write the session's evidence with the
question and answer as a measurement report (and a segment as a SEG), after showing exactly what goes where, into
the study's private Orthanc (or as files); what was stored comes back listed as a derived result, apart from the
image series, and the study still opens its images."""

from __future__ import annotations

import argparse
import io
import queue
import shutil
import threading
from pathlib import Path
from typing import Any

import pydicom
import pytest

from copilot.pacs.client import PacsClient
from copilot.pacs.orthanc import LocalOrthanc
from copilot.pacs.sample import write_ct_series
from copilot.panel.studies import open_study, study_for
from tests import test_pacs
from tests.dicom_validator import assert_valid_dicom
from tests.fake_openai import FakeOpenAI, tool

pacs, pacs_env = test_pacs.pacs, test_pacs.pacs_env  # the suite's private Orthanc and PACS environment

QUESTION = "Is there a bright structure in the chest?"
ANSWER = "A bright block lies in the axial slice shown.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: 15.0"


def upload(pacs: LocalOrthanc, folder: Path) -> list[pydicom.Dataset]:
    """A fresh CT study of its own on the PACS (each test stores into its own study)."""
    datasets = write_ct_series(folder)
    PacsClient(pacs.dicomweb).store(datasets, datasets[0].StudyInstanceUID)
    return datasets


def texts(ds: pydicom.Dataset) -> dict[str, str]:
    """The question and answer an SR carries: its Request and Finding TEXT items."""
    found: dict[str, str] = {}
    pending = list(ds.ContentSequence)
    while pending:
        item = pending.pop()
        if item.ValueType == "TEXT" and item.ConceptNameCodeSequence[0].CodeMeaning in ("Request", "Finding"):
            found[item.ConceptNameCodeSequence[0].CodeMeaning] = item.TextValue
        pending.extend(getattr(item, "ContentSequence", []))
    return found


def chat_lines(argv: list[str], lines: list[str]) -> tuple[int, str]:
    """`medcopilot chat ARGS` at a terminal where the clinician types `lines`."""
    from copilot.study.chat import Terminal, add_parser, run_chat

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    out = io.StringIO()
    term = Terminal(out=out, err=io.StringIO())
    term.lines = queue.Queue()
    term._reader = threading.current_thread()  # lines come from the test, not stdin
    for line in [*lines, None]:
        term.lines.put(line)  # type: ignore[arg-type]
    rc = run_chat(parser.parse_args(["chat", *argv]), term)
    return rc, out.getvalue()


def test_chat_store_puts_the_answer_and_a_segment_on_the_pacs(
    pacs: LocalOrthanc, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`/store` after an answer lists the report (with the question and answer) and the SEG with the PACS URL,
    stores both on `/approve`; the SR carries the texts and the answer's key slice and passes dciodvfy; the SEG is
    then a derived result of the study, and chat on the study URL still opens its CT."""
    from copilot.cli import main
    from copilot.errors import HandlerError
    from copilot.pacs.fetch import local_study
    from copilot.panel.derived import overlays_for, study_derived
    from copilot.panel.studies import dicom_series
    from copilot.replay import read_events

    datasets = upload(pacs, tmp_path / "ct")
    study = datasets[0].StudyInstanceUID
    url = f"{pacs.dicomweb}/studies/{study}"
    fake = FakeOpenAI([
        {"tool_calls": [tool("segment_threshold", {"volume": "chest axial", "output_segment": "block",
                                                   "lower": 1100, "upper": 5000})]},
        {"content": ANSWER},
    ])  # fmt: skip
    try:
        rc, out = chat_lines([url, "--track", "B", "--base-url", fake.base_url, "--trace-dir", str(tmp_path / "t")],
                             [QUESTION, "/store", "/approve"])  # fmt: skip
    finally:
        fake.stop()
    assert rc == 0, out
    assert f"→ {pacs.dicomweb}" in out and "question: «Is there a bright structure" in out and "DICOM SEG" in out
    assert "clinician_report.dcm: stored in the PACS" in out and "block_seg.dcm: stored in the PACS" in out
    events, _ = read_events(tmp_path / "t")
    writes = [e for e in events if e["type"] == "write_attempt"]
    assert [(w["handler"], w["decision"], w["by"], w["actor"]) for w in writes] == [
        ("export_evidence_sr", "approved", "clinician", "clinician"),
        ("export_dicom_seg", "approved", "clinician", "clinician"),
    ]
    client = PacsClient(pacs.dicomweb)
    by_modality = {s["modality"]: s for s in client.series(study)}
    assert set(by_modality) == {"CT", "SR", "SEG"}
    (sr,) = list(client.iter_series(study, by_modality["SR"]["uid"]))
    assert texts(sr) == {"Request": QUESTION, "Finding": ANSWER}
    assert sr.StudyInstanceUID == study and sr.SeriesDescription == "clinician_report"
    sr.save_as(tmp_path / "sr.dcm", enforce_file_format=True)
    assert_valid_dicom(tmp_path / "sr.dcm")

    # the study again: the SEG is a derived result, never an image series; chat opens the CT
    with pytest.raises(HandlerError) as refused:
        local_study(by_modality["SEG"]["url"])  # a derived result's series URL is not opened as an image
    assert refused.value.code == "not_an_image"
    assert main(["pacs", "search", pacs.dicomweb, "--patient-id", datasets[0].PatientID]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  ") and "—" in line]
    assert {line.split()[0] for line in listed if " SEG " in line or " SR " in line} == {"derived"}
    folder = local_study(url).path
    assert [s.modality for s in dicom_series(str(folder))] == ["CT"]
    derived = study_derived(str(folder))
    assert {(d.modality, d.description, d.folder) for d in derived} == {("SR", "clinician_report", None),
                                                                        ("SEG", "block_seg", None)}  # fmt: skip
    # the stored SEG beside its CT in a folder: still one image series, the SEG offered on it
    shutil.copy(tmp_path / "t" / "derived" / "block_seg.dcm", tmp_path / "ct" / "seg.dcm")
    assert [s.modality for s in dicom_series(tmp_path / "ct")] == ["CT"]
    (seg,) = overlays_for(study_derived(tmp_path / "ct"), datasets[0].SeriesInstanceUID)
    assert seg.source_series == (datasets[0].SeriesInstanceUID,) and seg.title.startswith("SEG #")
    fake = FakeOpenAI([{"content": "Nothing else.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: 15.0"}])
    try:
        rc, out = chat_lines([url, "--base-url", fake.base_url, "--trace-dir", str(tmp_path / "t2")], ["Anything?"])
    finally:
        fake.stop()
    assert rc == 0 and out.count("Nothing else.") == 1, out  # streamed at the terminal, printed once
    assert "derived results: " in out and "SR #901 clinician_report (on the PACS)" in out and "SEG #" in out


def test_a_store_the_clinician_rejects_writes_nothing_and_is_traced(pacs: LocalOrthanc, tmp_path: Path) -> None:
    """`/reject` in the Store: no object reaches the PACS or the derived folder; each write traced as rejected."""
    from copilot.replay import read_events

    datasets = upload(pacs, tmp_path / "ct")
    study = datasets[0].StudyInstanceUID
    fake = FakeOpenAI([{"content": ANSWER}])
    try:
        rc, out = chat_lines([f"{pacs.dicomweb}/studies/{study}", "--base-url", fake.base_url, "--trace-dir",
                              str(tmp_path / "t")], [QUESTION, "/store", "/reject not yet"])  # fmt: skip
    finally:
        fake.stop()
    assert rc == 0 and "not stored" in out
    assert {s["modality"] for s in PacsClient(pacs.dicomweb).series(study)} == {"CT"}
    assert not list((tmp_path / "t").glob("derived/*.dcm"))
    events, _ = read_events(tmp_path / "t")
    assert [(e["handler"], e["decision"]) for e in events if e["type"] == "write_attempt"] == [
        ("export_evidence_sr", "rejected")
    ]
    rejection = next(e for e in events if e["type"] == "clinician_rejection")
    assert rejection["reason"] == "not yet"


def test_desktop_store_on_a_pacs_study_asks_and_stores(pacs: LocalOrthanc, tmp_path: Path) -> None:
    """The desktop's Store (its Qt-free action): the dialog is shown the plan — the report and the PACS — before
    anything is written; approved, the report is on the PACS, valid, with the conversation's text."""
    from copilot.panel.model import PanelModel
    from copilot.panel.store import StorePlan, outcome_words, store_with
    from copilot.panel.studies import open_study, study_at
    from copilot.study.policies import conversation, model_settings

    datasets = upload(pacs, tmp_path / "ct")
    study_uid = datasets[0].StudyInstanceUID
    study = study_at(f"{pacs.dicomweb}/studies/{study_uid}")
    session = open_study(study, tmp_path / "t")
    model = PanelModel(session, study)
    fake = FakeOpenAI([{"content": ANSWER}])
    try:
        policy = conversation(model_settings("openai:scripted-model", base_url=fake.base_url), study, study.kind)
        model.run_episode(policy, QUESTION)
        assert model.wait(30) and model.status == "done"
    finally:
        fake.stop()
    shown: list[StorePlan] = []

    def dialog(plan: StorePlan) -> tuple[str, str]:
        assert {s["modality"] for s in PacsClient(pacs.dicomweb).series(study_uid)} == {"CT"}  # nothing yet
        shown.append(plan)
        return "approve", ""

    plan, outcomes = store_with(model, dialog)
    session.close()
    assert shown == [plan] and plan.title() == "Store to PACS"
    assert [s.handler for s in plan.steps] == ["export_evidence_sr"]
    assert plan.steps[0].plan.destinations == (pacs.dicomweb,) and "1 key slice(s)" in plan.lines()[0]
    assert [outcome_words(o) for o in outcomes] == ["clinician_report.dcm: stored in the PACS"]
    client = PacsClient(pacs.dicomweb)
    (series,) = [s for s in client.series(study_uid) if s["modality"] == "SR"]
    (sr,) = list(client.iter_series(study_uid, series["uid"]))
    assert texts(sr)["Finding"] == ANSWER
    sr.save_as(tmp_path / "sr.dcm", enforce_file_format=True)
    assert_valid_dicom(tmp_path / "sr.dcm")


def test_store_without_a_pacs_writes_files(tmp_path: Path) -> None:
    """A study from a folder: the plan names `file:` destinations, approved the SR is written there (owner-only);
    the session replays."""
    from copilot.panel.model import PanelModel
    from copilot.panel.store import store_with
    from copilot.panel.studies import open_study, study_for
    from copilot.replay import replay

    write_ct_series(tmp_path / "ct")
    study = study_for(str(tmp_path / "ct"))
    session = open_study(study, tmp_path / "t")
    model = PanelModel(session, study)
    model.answered.append((QUESTION, "See the key slice."))
    assert session.call("record_key_slice", {"view": "red", "offset": 15.0, "label": "block"}, actor="clinician").ok
    plan, outcomes = store_with(model, lambda p: ("approve", ""))
    session.close()
    (step,) = plan.steps
    assert plan.title() == "Export files" and step.plan.destinations[0].startswith("file:")
    written = tmp_path / "t" / "derived" / "clinician_report.dcm"
    assert outcomes[0].ok and written.is_file() and (written.stat().st_mode & 0o077) == 0
    assert texts(pydicom.dcmread(written)) == {"Request": QUESTION, "Finding": "See the key slice."}
    assert_valid_dicom(written)
    assert replay(tmp_path / "t").ok  # the clinician's export in Track A replays (checked, not written again)


def answered_host_conversation(tmp_path: Path) -> tuple[Any, Any]:
    """A host's session on a generated CT (under tmp_path/t) and its conversation, QUESTION answered with ANSWER."""
    from copilot.agent.loop import ChatAgent
    from copilot.agent.settings import AgentSettings
    from copilot.cases.pack import CasePack
    from copilot.host.conversation import HostConversation

    write_ct_series(tmp_path / "ct")
    session = open_study(study_for(str(tmp_path / "ct")), tmp_path / "t")
    fake = FakeOpenAI([{"content": ANSWER}])
    try:
        settings = AgentSettings(base_url=fake.base_url, model="m", max_retries=0)
        own = CasePack(Path("."), "own-study", "host_radiology", {}, {}, "radiology")  # as a host adopts its scene
        conv = HostConversation(session, own, lambda: ChatAgent(settings), budget=5)
        conv.approve_each = False
        conv.ask(QUESTION)
        assert conv.wait(30) and conv.turns[-1].status == "done", conv.turns[-1].answer
    finally:
        fake.stop()
    return session, conv


def test_the_host_panels_store_button(tmp_path: Path) -> None:
    """The Slicer/QuPath panel's Store (its Qt-free view-model) on a host conversation: enabled once the answer is
    in; the plan shown names the answer's key slice and the question; approved, the SR is written as a file."""
    from copilot.host.panel import panel_state
    from copilot.host.store import host_store
    from copilot.panel.store import StorePlan

    session, conv = answered_host_conversation(tmp_path)
    assert panel_state(conv).can_store
    shown: list[StorePlan] = []

    def dialog(plan: StorePlan) -> tuple[str, str]:
        shown.append(plan)
        return "approve", ""

    said = host_store(conv, dialog)
    session.close()
    assert said == ["clinician_report.dcm: written"]
    assert "1 key slice(s)" in shown[0].lines()[0] and f"question: «{QUESTION}»" in shown[0].lines()[0]
    assert conv.answer_items == [] and [e["kind"] for e in session.evidence()] == ["key_slice"]
    written = tmp_path / "t" / "derived" / "clinician_report.dcm"
    assert texts(pydicom.dcmread(written)) == {"Request": QUESTION, "Finding": ANSWER}


def test_non_image_objects_are_known_by_modality_or_sop_class() -> None:
    """A SEG, SR, KO or PR is a derived result by its modality, or by its SOP class when the modality is wrong; an
    RT Dose and a CT are images."""
    from pydicom.dataset import Dataset

    from copilot.panel.studies import is_derived_object

    def header(modality: str, sop: str) -> Dataset:
        ds = Dataset()
        ds.Modality, ds.SOPClassUID = modality, sop
        return ds

    derived = [("SEG", "1.2.840.10008.5.1.4.1.1.66.4"), ("OT", "1.2.840.10008.5.1.4.1.1.66.4"),
               ("OT", "1.2.840.10008.5.1.4.1.1.88.34"), ("KO", "1.2.840.10008.5.1.4.1.1.88.59"),
               ("OT", "1.2.840.10008.5.1.4.1.1.11.1"), ("SR", "")]  # fmt: skip
    images = [("CT", "1.2.840.10008.5.1.4.1.1.2"), ("RTDOSE", "1.2.840.10008.5.1.4.1.1.481.2"),
              ("SM", "1.2.840.10008.5.1.4.1.1.77.1.6")]  # fmt: skip
    assert all(is_derived_object(header(m, s)) for m, s in derived)
    assert not any(is_derived_object(header(m, s)) for m, s in images)


def test_an_answer_without_evidence_is_stored_as_text_alone(tmp_path: Path) -> None:
    """A negative answer states no evidence: the report carries the question and answer alone (TID 1500's
    Qualitative Evaluations), refers to the series shown, and passes dciodvfy; with no text either, nothing."""
    from copilot.panel.model import PanelModel
    from copilot.panel.store import plan_store, store_with

    datasets = write_ct_series(tmp_path / "ct")
    study = study_for(str(tmp_path / "ct"))
    session = open_study(study, tmp_path / "t")
    model = PanelModel(session, study)
    empty = plan_store(model)
    assert empty.steps == [] and "no key slice, point or distance" in empty.problems[0]
    model.answered.append(("Is there a fracture?", "No fracture is seen."))
    plan, outcomes = store_with(model, lambda p: ("approve", ""))
    session.close()
    assert "no evidence: the text alone" in plan.lines()[0] and outcomes[0].ok
    sr = pydicom.dcmread(tmp_path / "t" / "derived" / "clinician_report.dcm")
    assert texts(sr) == {"Request": "Is there a fracture?", "Finding": "No fracture is seen."}
    refs = {i.ReferencedSOPInstanceUID for s in sr.CurrentRequestedProcedureEvidenceSequence
            for r in s.ReferencedSeriesSequence for i in r.ReferencedSOPSequence}  # fmt: skip
    assert refs == {d.SOPInstanceUID for d in datasets}
    assert_valid_dicom(tmp_path / "t" / "derived" / "clinician_report.dcm")


def test_a_slides_store_writes_its_evidence_as_annotations(tmp_path: Path) -> None:
    """A pathology session (a generated slide): the Store is on; with no slide evidence yet it says so, asks nothing
    and writes nothing; once a view is recorded, the approved Store writes GeoJSON annotations beside the session
    (a slide file, not a DICOM slide), traced as the clinician's write."""
    import json

    import numpy as np

    from copilot.cases.pack import CasePack
    from copilot.cases.slides import write_pyramid
    from copilot.host.conversation import HostConversation
    from copilot.host.panel import panel_state
    from copilot.host.store import host_store
    from copilot.panel.store import StorePlan, nothing_to_store

    img = np.full((512, 768, 3), 230, dtype=np.uint8)
    write_pyramid(tmp_path / "slide.tif", img, mpp=0.5, downsamples=(1, 4), bigtiff=False)
    session = open_study(study_for(str(tmp_path / "slide.tif")), tmp_path / "t")
    own = CasePack(Path("."), "qupath-image", "host_pathology", {}, {}, "pathology")
    conv = HostConversation(session, own, lambda: None, budget=1)
    state = panel_state(conv)
    assert nothing_to_store(session) == "" and state.store_note == "" and state.can_store
    asked: list[StorePlan] = []

    def dialog(plan: StorePlan) -> tuple[str, str]:
        asked.append(plan)
        return "approve", ""

    assert host_store(conv, dialog) == ["nothing to store: the slide annotations: no slide point or recorded view to "
                                        "store yet"] and asked == []  # fmt: skip
    assert not [e for e in session.trace_events() if e["type"] == "write_attempt"]
    assert session.call("record_view_evidence", {"label": "tumour", "x": 400, "y": 600}, actor="clinician").ok
    assert host_store(conv, dialog) == ["clinician_annotations.geojson: written"]
    written = json.loads((tmp_path / "t" / "derived" / "clinician_annotations.geojson").read_text())
    assert len(asked) == 1 and written["type"] == "FeatureCollection" and written["features"]
    session.close()
