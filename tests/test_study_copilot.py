"""The copilot on a clinician's own study: a DICOM series whose headers name the patient, and a slide whose TIFF
tags do. A scripted OpenAI-compatible service records every request body; a two-turn conversation runs with one
proposal rejected and others approved, on the desktop view-model and through `medcopilot chat`; the answer's
evidence is drawn where it points; the trace holds the clinician's decisions and replays; and no identifier
occurs in any request body or in any text drawn into an image."""

from __future__ import annotations

import io
import json
import re
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pydicom
import pytest
import tifffile
from PIL import Image, ImageDraw

from copilot.cli import main
from copilot.engine.volume import render
from copilot.panel.model import PanelModel
from copilot.panel.report import EVIDENCE_RED, evidence_figures
from copilot.panel.studies import open_study, study_for
from copilot.study.agent import KEEP_IMAGE_MESSAGES, bound_context
from copilot.study.policies import conversation, model_settings, policy_problem, study_policy
from copilot.study.privacy import Redactor, disclosure, is_local
from tests.fake_openai import FakeOpenAI, images_in, tool
from tests.workstation_data import write_dicom_series

STUDY_UID = "2.25.314159265358979323846264"
SERIES_UID = "2.25.271828182845904523536028"
TAGS = {
    "PatientName": "QUIXLEY^JOHNATHAN",
    "PatientID": "MRN-7734921",
    "PatientBirthDate": "19581123",
    "PatientSex": "F",
    "PatientAge": "066Y",
    "AccessionNumber": "ACC20240917X",
    "InstitutionName": "Saint Elsewhere General",
    "ReferringPhysicianName": "HOUSEMAN^GREGORIO",
    "StudyDate": "20240917",
    "SeriesDate": "20240917",
    "AcquisitionDate": "20240917",
    "StudyTime": "101112",
    "StudyInstanceUID": STUDY_UID,
}
DICOM_FORBIDDEN = [
    "QUIXLEY", "JOHNATHAN", "MRN-7734921", "19581123", "1958-11-23", "066Y", "ACC20240917X", "Elsewhere",
    "HOUSEMAN", "GREGORIO", "20240917", "2024-09-17", STUDY_UID, SERIES_UID,
]  # fmt: skip
SLIDE_DESCRIPTION = "Scanner QX|Patient = ZAMBRANO^LUCILLE|Barcode = S24-118734|Date = 09/17/24"
SLIDE_FORBIDDEN = ["ZAMBRANO", "LUCILLE", "S24-118734", "09/17/24", "PELLEGRINO", "2024:09:17", "MRN-5512093"]
REJECT_REASON = "keep my window, please"


# ----- studies -----


@pytest.fixture(scope="module")
def dicom_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One MR series (12 slices, 2 mm, a bright block) whose headers carry a patient's identifiers, in a folder
    named by the patient ID; identifiers are stamped with pydicom."""
    folder = tmp_path_factory.mktemp("studies") / "MRN-7734921"
    data = np.zeros((12, 40, 48), dtype=np.int16)
    data[3:9, 10:30, 12:36] = 600
    write_dicom_series(folder, data, SERIES_UID, "T2 axial", 4)
    for f in sorted(folder.iterdir()):
        ds = pydicom.dcmread(f)
        for key, value in TAGS.items():
            setattr(ds, key, value)
        ds.save_as(f)
    head = pydicom.dcmread(next(folder.iterdir()), stop_before_pixels=True)
    assert str(head.PatientName) == TAGS["PatientName"] and head.SeriesInstanceUID == SERIES_UID
    return folder


@pytest.fixture(scope="module")
def slide_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-level JPEG-tiled slide (1024×768, 2 µm/px) whose description, artist and date tags name people."""
    path = tmp_path_factory.mktemp("slides") / "MRN-5512093" / "he_section.tiff"
    path.parent.mkdir(parents=True)
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:768, 0:1024]
    pink = np.stack([235 - 40 * ((x // 64 + y // 64) % 2), 180 + 0 * x, 215 + 0 * x], axis=-1)
    image = np.clip(pink + rng.normal(0, 6, pink.shape), 0, 255).astype(np.uint8)
    pil = Image.fromarray(image)
    with tifffile.TiffWriter(path) as tw:
        for n, d in enumerate((1, 4)):
            level = image if d == 1 else np.asarray(pil.reduce(d))
            tags: dict[str, Any] = {}
            if n == 0:
                tags = {"description": SLIDE_DESCRIPTION, "datetime": "2024:09:17 08:30:00",
                        "extratags": [(315, "s", 0, "PELLEGRINO^MARCO", True)]}  # fmt: skip
            tw.write(level, tile=(256, 256), compression="jpeg", photometric="rgb", resolution=(5000 / d, 5000 / d),
                     resolutionunit="CENTIMETER", subfiletype=0 if n == 0 else 1, metadata=None, **tags)  # fmt: skip
    return path


# ----- helpers -----


@pytest.fixture
def drawn_text(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text drawn into any image (corner overlays, slide labels) while the test runs."""
    drawn: list[str] = []
    original = ImageDraw.ImageDraw.text

    def text(self: Any, xy: Any, value: Any, *args: Any, **kw: Any) -> Any:
        drawn.append(str(value))
        return original(self, xy, value, *args, **kw)

    monkeypatch.setattr(ImageDraw.ImageDraw, "text", text)
    measure = render._text_length  # corner overlays are measured, then drawn from cached glyph masks

    def length(px: int, value: str) -> float:
        drawn.append(value)
        return measure(px, value)

    monkeypatch.setattr(render, "_text_length", length)
    return drawn


@pytest.fixture
def no_windows_left() -> Any:
    """Close every window a `medcopilot gui` run left open, so that later Qt tests have the screen to themselves."""
    yield
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is not None:
        for widget in QApplication.topLevelWidgets():
            widget.close()
            widget.deleteLater()
        app.processEvents()


def assert_nothing_identifying(fake: FakeOpenAI, drawn: list[str], forbidden: list[str]) -> None:
    assert fake.bodies, "no request was made"
    for n, body in enumerate(fake.bodies):
        text = body.decode("utf-8").lower()
        for value in forbidden:
            assert value.lower() not in text, f"request {n} carries {value!r}"
    assert drawn, "no overlay text was drawn"
    for line in drawn:
        for value in forbidden:
            assert value.lower() not in line.lower(), f"an image overlay carries {value!r}: {line!r}"


def block_centre(session: Any) -> list[float]:
    """RAS of the bright block's centre, from the series geometry."""
    inv = session.call("get_viewer_state", {"include_volumes": True}, actor="system").result["inventory"][0]
    m = np.asarray(inv["ijk_to_ras"], dtype=float)
    return [round(float(v), 3) for v in (m @ np.array([23.5, 19.5, 5.5, 1.0]))[:3]]


def radiology_script(ras: list[float]) -> list[dict[str, Any]]:
    r, a, s = ras
    first = (
        f"A bright, sharply bounded block lies in the series.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: {s}\n"
        f"RAS: [{r}, {a}, {s}] bright block\nDISTANCE_MM: [{r - 24}, {a}, {s}] -> [{r + 24}, {a}, {s}] width"
    )
    return [
        {"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": s})]},
        {"tool_calls": [tool("window_preset", {"preset": "mr_t2_flair", "view": "red"})]},
        {"tool_calls": [tool("record_point", {"ras": [r, a, s], "label": "bright block"})]},
        {"content": first},
        {"content": f"It measures about 48 mm from left to right.\nEVIDENCE:\nRAS: [{r}, {a}, {s}] bright block"},
    ]


SLIDE_SCRIPT = [
    {"tool_calls": [tool("zoom", {"direction": "in", "amount": 2})]},
    {"tool_calls": [tool("center_on_wsi_coordinate", {"x": 100, "y": 100})]},
    {"tool_calls": [tool("record_view_evidence", {"label": "checkerboard field"})]},
    {"content": "A regular pattern without nuclei.\nEVIDENCE:\nWSI: [600, 380] pattern centre"},
    {"content": "No: nothing resembling tissue is seen.\nEVIDENCE:\nWSI: [600, 380] pattern centre"},
]


def run_turn(model: PanelModel, policy: Any, question: str, decisions: list[Any]) -> None:
    """Ask one question, answering each proposal with the next decision ('approve' or ('reject', reason))."""
    model.run_episode(policy, question)
    seen = None
    while not model.wait(0.02):
        pending = model.pending
        if pending is not None and pending is not seen:
            seen = pending
            decision = decisions.pop(0)
            if decision == "approve":
                model.approve()
            else:
                model.reject(decision[1])
    assert model.status == "done", model.messages[-1]


def events(trace_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (trace_dir / "trace.jsonl").read_text(encoding="utf-8").splitlines()]


def check_trace(trace_dir: Path, rejected: str, approvals: int) -> None:
    evs = events(trace_dir)
    kinds = [e["type"] for e in evs]
    assert kinds.count("clinician_instruction") == 2
    assert kinds.count("clinician_approval") == approvals
    (rejection,) = [e for e in evs if e["type"] == "clinician_rejection"]
    assert rejection["handler"] == rejected and rejection["reason"] == REJECT_REASON and rejection["args"]
    assert any(e["type"] == "answer_evidence" and e["items"] for e in evs)
    assert rejected not in [e.get("handler") for e in evs if e["type"] == "handler_call" and e["actor"] == "agent"]
    assert main(["replay", str(trace_dir)]) == 0


def rejection_reached_the_model(fake: FakeOpenAI) -> None:
    tool_results = [m["content"] for r in fake.requests for m in r["messages"] if m["role"] == "tool"]
    assert any("rejected_by_clinician" in t and REJECT_REASON in t for t in tool_results)


# ----- the DICOM study -----


def test_dicom_conversation_on_the_desktop_view_model(dicom_study: Path, tmp_path: Path, drawn_text: list[str]) -> None:
    study = study_for(dicom_study)
    session = open_study(study, tmp_path / "trace")
    ras = block_centre(session)
    fake = FakeOpenAI(radiology_script(ras))
    try:
        model = PanelModel(session, study)
        model.set_approve_mode(True)
        policy = study_policy("openai", study, session.kind, "question", base_url=fake.base_url)
        decisions: list[Any] = ["approve", ("reject", REJECT_REASON), "approve"]
        run_turn(model, policy, "Where is the abnormality in patient MRN-7734921 (QUIXLEY)?", decisions)
        first_answer = model.answer_items
        run_turn(model, policy, "How large is it?", [])
        figures = evidence_figures(session, model.evidence)
        report = model.export_report(tmp_path / "report.html").read_text(encoding="utf-8")
    finally:
        session.close()
        fake.stop()
    assert len(fake.requests) == 5 and not decisions
    first = fake.requests[0]["messages"]
    assert "study inventory" in first[1]["content"][0]["text"].lower() and "T2 axial" in first[1]["content"][0]["text"]
    assert "[redacted]" in first[1]["content"][0]["text"]  # the typed patient ID and name were removed
    rejection_reached_the_model(fake)
    follow = fake.requests[4]["messages"]
    assert follow[-1]["content"].startswith("Follow-up question: How large is it?")
    assert any(m["role"] == "assistant" and "bright block" in str(m["content"]) for m in follow)  # same conversation
    image_messages = [m for m in follow if isinstance(m["content"], list) and images_in({"messages": [m]})]
    assert 0 < len(image_messages) <= KEEP_IMAGE_MESSAGES
    kinds = sorted(e["kind"] for e in first_answer)
    assert kinds == ["distance", "key_slice", "point"]
    # the answer's RAS point is drawn where it is: the marker maps back to that point, and the pixel is red
    image, _, frame = figures[0]
    marker = next(m for m in frame.markers if m.kind == "point" and m.label == "bright block")
    x, y = marker.coords[:2]
    back = frame.to_ras(x, y)
    assert back is not None and np.allclose(back[:2], ras[:2], atol=1.0)
    pixels = np.asarray(image)
    patch = pixels[int(y) - 1 : int(y) + 2, int(x) - 1 : int(x) + 2].reshape(-1, 3)
    assert any(tuple(p) == EVIDENCE_RED for p in patch)
    check_trace(tmp_path / "trace", "window_preset", approvals=2)
    assert_nothing_identifying(fake, drawn_text, DICOM_FORBIDDEN)
    assert 'class="phi"' in report and "MRN-7734921" in report  # the trace keeps what was typed; the page marks it


def test_dicom_conversation_through_chat(
    dicom_study: Path, tmp_path: Path, drawn_text: list[str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    study = study_for(dicom_study)
    probe = open_study(study)
    ras = block_centre(probe)
    probe.close()
    fake = FakeOpenAI(radiology_script(ras))
    monkeypatch.setattr("sys.stdin", io.StringIO(f"/approve\n/reject {REJECT_REASON}\n/approve\n"))
    try:
        rc = main([
            "chat", str(dicom_study), "--ask", "Where is the abnormality?", "--ask", "How large is it?",
            "--approve", "--base-url", fake.base_url, "--trace-dir", str(tmp_path / "trace"),
        ])  # fmt: skip
    finally:
        fake.stop()
    out = capsys.readouterr().out
    assert rc == 0
    assert "answer: A bright, sharply bounded block" in out and "answer: It measures about 48 mm" in out
    assert "evidence: point: bright block" in out and "evidence: distance: width" in out
    assert "proposed: window_preset" in out
    assert "acquired 2024-09-17 (shown here only" in out  # the clinician sees the date; no request carries it
    rejection_reached_the_model(fake)
    check_trace(tmp_path / "trace", "window_preset", approvals=2)
    assert (tmp_path / "trace" / "report.html").is_file()
    assert_nothing_identifying(fake, drawn_text, DICOM_FORBIDDEN)


# ----- the slide -----


def test_slide_conversation_on_the_desktop_view_model(slide_study: Path, tmp_path: Path, drawn_text: list[str]) -> None:
    study = study_for(slide_study)
    session = open_study(study, tmp_path / "trace")
    fake = FakeOpenAI(SLIDE_SCRIPT)
    try:
        model = PanelModel(session, study)
        model.set_approve_mode(True)
        policy = conversation(model_settings("openai", base_url=fake.base_url), study, session.kind)
        decisions: list[Any] = ["approve", ("reject", REJECT_REASON), "approve"]
        run_turn(model, policy, "Is there tumour on slide S24-118734 of ZAMBRANO?", decisions)
        run_turn(model, policy, "Any tissue at all?", [])
        figures = evidence_figures(session, model.evidence)
    finally:
        session.close()
        fake.stop()
    assert len(fake.requests) == 5 and not decisions
    rejection_reached_the_model(fake)
    assert [e["kind"] for e in model.answer_items] == ["wsi_point"]
    image, _, frame = figures[0]
    marker = next(m for m in frame.markers if m.kind == "point" and m.label == "pattern centre")
    x, y = marker.coords[:2]
    assert frame.viewport is not None
    assert np.allclose(frame.to_level0(x, y), (600, 380), atol=1.0)
    patch = np.asarray(image)[int(y) - 1 : int(y) + 2, int(x) - 1 : int(x) + 2].reshape(-1, 3)
    assert any(tuple(p) == EVIDENCE_RED for p in patch)
    check_trace(tmp_path / "trace", "center_on_wsi_coordinate", approvals=2)
    assert_nothing_identifying(fake, drawn_text, SLIDE_FORBIDDEN)


def test_slide_conversation_through_chat(
    slide_study: Path, tmp_path: Path, drawn_text: list[str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    fake = FakeOpenAI(SLIDE_SCRIPT)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"/approve\n/reject {REJECT_REASON}\n/approve\n"))
    try:
        rc = main([
            "chat", str(slide_study), "--ask", "Is there tumour?", "--ask", "Any tissue at all?", "--approve",
            "--base-url", fake.base_url, "--trace-dir", str(tmp_path / "trace"),
        ])  # fmt: skip
    finally:
        fake.stop()
    out = capsys.readouterr().out
    assert rc == 0 and "evidence: wsi_point: pattern centre x 600, y 380" in out
    check_trace(tmp_path / "trace", "center_on_wsi_coordinate", approvals=2)
    assert_nothing_identifying(fake, drawn_text, SLIDE_FORBIDDEN)


# ----- exit codes: never a crash, always a reason -----


def test_chat_ask_without_approval_exits_zero_with_answer_and_evidence(
    dicom_study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeOpenAI([{"content": "Nothing to see.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: 4.0"}])
    try:
        rc = main(["chat", str(dicom_study), "--ask", "Anything?", "--base-url", fake.base_url,
                   "--trace-dir", str(tmp_path / "t")])  # fmt: skip
    finally:
        fake.stop()
    out = capsys.readouterr().out
    assert rc == 0 and "answer: Nothing to see." in out and "evidence: key_slice: answer key slice S 4.0" in out


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_chat_with_the_service_down_exits_non_zero_with_one_line(
    dicom_study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEDCOPILOT_MAX_RETRIES", "0")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    rc = main(["chat", str(dicom_study), "--ask", "Anything?", "--base-url", url, "--trace-dir", str(tmp_path / "a")])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert rc == 1
    assert errors == [f"error: model service at {url} is not reachable (check OPENAI_BASE_URL or --base-url)"]
    assert any(e["type"] == "agent_error" for e in events(tmp_path / "a"))
    fake = FakeOpenAI([{"status": 503}])
    try:
        rc = main(["chat", str(dicom_study), "--ask", "Anything?", "--base-url", fake.base_url,
                   "--trace-dir", str(tmp_path / "b")])  # fmt: skip
    finally:
        fake.stop()
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert rc == 1 and errors == [f"error: model service at {fake.base_url} answered HTTP 503"]
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rc = main(["chat", str(dicom_study), "--ask", "Anything?", "--trace-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "OPENAI_BASE_URL" in err[0]
    assert not (tmp_path / "c").exists()  # refused before the study was opened


@pytest.mark.heavy  # Qt widgets
def test_offline_policies_are_unavailable_on_a_plain_study_with_a_reason(
    dicom_study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_windows_left: None
) -> None:
    study = study_for(dicom_study)
    assert "benchmark" in (policy_problem("baseline", study) or "")
    assert "benchmark" in (policy_problem("prior", study) or "")
    shot = tmp_path / "shot.png"
    rc = main(["gui", str(dicom_study), "--run", "baseline", "--screenshot", str(shot)])
    err = capsys.readouterr().err
    assert rc != 0 and "needs a MedFlow case pack" in err
    rc = main(["chat", str(dicom_study), "--policy", "prior", "--ask", "Anything?"])
    assert rc == 2 and "needs a MedFlow case pack" in capsys.readouterr().err


def test_a_rejection_never_crashes_the_baseline(brain_case: Path, tmp_path: Path) -> None:
    from copilot.medflow.policies import baseline_policy

    case = study_for(brain_case)
    session = open_study(case, tmp_path / "trace")
    model = PanelModel(session, case)
    model.set_approve_mode(True)
    model.run_episode(baseline_policy())
    seen = None
    while not model.wait(0.02):
        if model.pending is not None and model.pending is not seen:
            seen = model.pending
            model.reject("not this one") if len(model.timeline) > 2 else model.approve()
    session.close()
    assert model.status == "rejected"
    answer = model.messages[-1][1]
    assert "rejected" in answer and "not this one" in answer
    assert any(e["type"] == "clinician_rejection" for e in events(tmp_path / "trace"))


# ----- the rules themselves -----


def test_context_is_bounded_and_identifiers_scrubbed() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s"}]
    for n in range(6):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"view {n}"}, image, image]})
        messages.append({"role": "tool", "tool_call_id": str(n), "content": "x" * 5000})
    out = bound_context(messages, turn_start=7)
    with_images = [m for m in out if isinstance(m["content"], list) and images_in({"messages": [m]})]
    assert len(with_images) == KEEP_IMAGE_MESSAGES and with_images[-1]["content"][0]["text"] == "view 5"
    assert "omitted" in out[1]["content"][-1]["text"]
    assert len(out[2]["content"]) < 2000 and len(out[-1]["content"]) == 5000  # only earlier questions' results cut
    r = Redactor(["QUIXLEY^JOHNATHAN", "QUIXLEY", "MRN-7734921"])
    assert r.scrub({"a": ["Mr Quixley (MRN-7734921) does well"]}) == {"a": ["Mr [redacted] ([redacted]) does well"]}


def test_a_remote_service_is_announced_once_before_the_first_request(
    dicom_study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openai

    monkeypatch.setenv("MEDCOPILOT_OPTIN", str(tmp_path / "optin.json"))

    assert is_local("http://127.0.0.1:8000/v1") and is_local("http://localhost:1234/v1")
    assert not is_local("https://api.openai.com/v1") and not is_local(None)
    study = study_for(dicom_study)
    session = open_study(study)
    fake = FakeOpenAI([{"content": "One."}, {"content": "Two."}])
    said: list[tuple[str, int]] = []
    try:
        settings = model_settings("openai", base_url="https://models.example.org/v1", max_retries=0)
        client = openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
        policy = conversation(settings, study, session.kind, ask=lambda text: True, client=client)  # opted in
        policy.announce = lambda line: said.append((line, len(fake.requests)))
        model = PanelModel(session, study)
        for question in ("First?", "Second?"):
            model.run_episode(policy, question)
            model.wait()
    finally:
        session.close()
        fake.stop()
    assert said == [(disclosure("https://models.example.org/v1", "radiology"), 0)]
    assert "https://models.example.org/v1" in said[0][0] and "identifiers" in said[0][0]


@pytest.mark.heavy  # Qt widgets
def test_gui_ask_screenshot_exit_codes(
    dicom_study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    no_windows_left: None,
) -> None:  # fmt: skip
    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "sessions"))
    fake = FakeOpenAI([{"content": "A block.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: 11"}])
    shot = tmp_path / "ok.png"
    try:
        rc = main(["gui", str(dicom_study), "--ask", "What is there?", "--base-url", fake.base_url,
                   "--screenshot", str(shot)])  # fmt: skip
    finally:
        fake.stop()
    assert rc == 0 and shot.is_file() and len(fake.requests) == 1
    (session,) = [p for p in (tmp_path / "sessions").iterdir() if p.is_dir()]  # the desktop session's trace
    assert re.fullmatch(r"\d{8}-\d{6}-radiology-[0-9a-f]{6}", session.name)  # never named after the study
    assert "clinician_instruction" in [e["type"] for e in events(session)]
    assert main(["replay", str(session)]) == 0
    monkeypatch.setenv("MEDCOPILOT_MAX_RETRIES", "0")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    rc = main(["gui", str(dicom_study), "--ask", "What is there?", "--base-url", url, "--screenshot",
               str(tmp_path / "down.png")])  # fmt: skip
    assert rc == 1 and "is not reachable" in capsys.readouterr().err


def test_a_series_name_holding_an_identifier_is_refused_before_sending(dicom_study: Path) -> None:
    from copilot.study.privacy import PrivacyError, check_images

    session = open_study(study_for(dicom_study))
    try:
        check_images(session, Redactor(["MRN-7734921"]))  # the real series name is clean
        with pytest.raises(PrivacyError, match="rename"):
            check_images(session, Redactor(["T2 axial"]))  # as if the series were named after the patient
    finally:
        session.close()


@pytest.mark.heavy  # Qt widgets
def test_the_panel_greys_offline_policies_on_a_plain_study(
    dicom_study: Path, qtbot: Any, no_windows_left: None
) -> None:
    from copilot.gui.app import build_window

    window = build_window(dicom_study)
    qtbot.addWidget(window)
    box = window.panel.policy
    names = [box.itemText(n) for n in range(box.count())]
    enabled = {name: box.model().item(n).isEnabled() for n, name in enumerate(names)}
    model_entry = "Model (OpenAI, Anthropic, Gemini, local)…"
    assert enabled == {"baseline (offline)": False, "prior (offline)": False, model_entry: True}
    tip = box.itemData(names.index("baseline (offline)"), 3)  # Qt.ToolTipRole
    assert "needs a MedFlow case pack" in tip and box.currentText() == model_entry
    trace = window.model.session.trace_dir
    assert trace is not None and str(trace) in window.panel.trace_label.text()
    window.close()


def test_a_stop_is_audited_and_the_conversation_goes_on(dicom_study: Path, tmp_path: Path) -> None:
    study = study_for(dicom_study)
    session = open_study(study, tmp_path / "trace")
    fake = FakeOpenAI([{"tool_calls": [tool("scroll", {"view": "red", "direction": "up"})]}, {"content": "Fine."}])
    try:
        model = PanelModel(session, study)
        model.set_approve_mode(True)
        policy = conversation(model_settings("openai", base_url=fake.base_url), study, session.kind)
        model.run_episode(policy, "Scroll up, please.")
        while model.pending is None:
            model.wait(0.02)
        model.stop()
        model.wait()
        assert model.status == "stopped"
        model.set_approve_mode(False)
        model.run_episode(policy, "Then just answer.")
        model.wait()
    finally:
        session.close()
        fake.stop()
    assert model.status == "done" and model.messages[-1] == ("agent", "Fine.")
    stop = next(e for e in events(tmp_path / "trace") if e["type"] == "clinician_stop")
    assert stop["during"] == "approval" and stop["handler"] == "scroll"
    last = fake.requests[-1]["messages"]  # the stopped call was answered, so the conversation stays well formed
    assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "user"] and "stopped" in last[-2]["content"]


def test_a_failed_first_request_leaves_the_next_question_a_fresh_start(
    dicom_study: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDCOPILOT_MAX_RETRIES", "0")
    study = study_for(dicom_study)
    session = open_study(study)
    fake = FakeOpenAI([{"status": 500}, {"content": "Now it works."}])
    try:
        model = PanelModel(session, study)
        policy = conversation(model_settings("openai", base_url=fake.base_url), study, session.kind)
        model.run_episode(policy, "First try?")
        model.wait()
        assert model.status == "error" and "HTTP 500" in model.messages[-1][1]
        model.run_episode(policy, "Second try?")
        model.wait()
    finally:
        session.close()
        fake.stop()
    assert model.status == "done" and model.messages[-1] == ("agent", "Now it works.")
    second = fake.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user"] and "Second try?" in second[1]["content"][0]["text"]
    assert images_in(fake.requests[1]) == 3  # the opening views again


def test_the_free_form_evidence_block() -> None:
    from copilot.panel.answer_evidence import answer_evidence

    text = (
        "Two foci.\n**EVIDENCE:**\nKEY_SLICE_CORONAL_MM: -12 mm\nRAS: [1, 2, 3] first focus\nRAS: [4.5, -6, 7e1]\n"
        "DISTANCE_MM: [0, 0, 0] -> [3, 4, 0] long axis\nRAS: [nan, 1, 2]\nnot a line\nWSI: [5, 6]\n"
    )
    items = answer_evidence(text, "radiology")
    assert [(e["kind"], e["label"]) for e in items] == [
        ("key_slice", "answer key slice A"), ("point", "first focus"), ("point", "answer point 3"),
        ("distance", "long axis"),
    ]  # fmt: skip
    assert items[0]["view"] == "green" and items[2]["ras"] == [4.5, -6.0, 70.0] and items[3]["distance_mm"] == 5.0
    slide = answer_evidence("EVIDENCE:\nWSI: [10240, 7712] mitosis\nWSI: 3, 4", "pathology")
    assert [(e["point"]["x"], e["label"]) for e in slide] == [(10240.0, "mitosis"), (3.0, "answer point 2")]
    benchmark = "EVIDENCE:\nKEY_SLICE_AXIAL_MM: 1\nKEY_SLICE_SAGITTAL_MM: 2\nKEY_SLICE_CORONAL_MM: 3\nRAS: [2, 3, 1]"
    assert [e["kind"] for e in answer_evidence(benchmark, "radiology")] == [
        "point",
        "key_slice",
        "key_slice",
        "key_slice",
    ]
    assert answer_evidence("No block here.", "radiology") == []
