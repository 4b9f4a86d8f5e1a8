"""Text burnt into the pixels is read by OCR (Tesseract) before an image leaves the machine: a patient's name burnt
into a series the clinician chose to send reaches the remote service blanked (the sent images decoded and read
again), traced by count; the view's own corner text stays. Skipped where the `tesseract` program is missing."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pydicom
import pytest
from PIL import Image, ImageDraw, ImageFont

from copilot.panel import ocr
from copilot.panel.identifiers import study_identifiers
from copilot.panel.model import PanelModel
from copilot.panel.studies import open_study, study_for
from copilot.study.policies import conversation, model_settings
from copilot.study.privacy import Redactor
from tests.fake_openai import FakeOpenAI
from tests.workstation_data import write_dicom_series

pytestmark = pytest.mark.skipif(not ocr.available(), reason="the tesseract program (Debian: tesseract-ocr) is missing")

NAME = "MÜLLER^HANS"


def _png(draw: Any, size: tuple[int, int] = (512, 512)) -> bytes:
    image = Image.new("L", size, 0)
    draw(ImageDraw.Draw(image))
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def _read(data: bytes) -> str:
    return " ".join(w.text for w in ocr.read_words(data)).lower()


def test_a_burnt_in_name_is_blanked_and_the_corner_text_kept() -> None:
    redactor = Redactor(["MÜLLER^HANS", "MULLER", "HANS", "PAT-4471-0932"])
    font, small = ImageFont.load_default(size=22), ImageFont.load_default(size=16)
    png = _png(lambda d: (d.text((40, 60), "MULLER HANS", fill=230, font=font),
                          d.text((40, 420), "Axial S 12.5 mm", fill=230, font=small)))  # fmt: skip
    events: list[tuple[str, dict[str, Any]]] = []
    guard = ocr.ImageGuard(redactor.found_in, lambda kind, payload: events.append((kind, payload)))
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    sent = guard.data_url(url)
    assert sent != url and guard.data_url(url) == sent and guard.read == 1  # read once
    text = _read(base64.b64decode(sent.split(",", 1)[1]))
    assert "muller" not in text and "hans" not in text and "axial" in text
    assert [k for k, _ in events] == ["image_text_blanked"] and events[0][1]["words"] == 2
    assert "MULLER" not in json.dumps(events)
    clean = "data:image/png;base64," + base64.b64encode(_png(lambda d: d.text((40, 60), "Axial", fill=230,
                                                                             font=font))).decode()  # fmt: skip
    assert guard.data_url(clean) == clean
    assert guard.data_url("data:image/png;base64,AAAA") != "data:image/png;base64,AAAA"  # undecodable: withheld
    assert events[-1][0] == "image_withheld"


@pytest.fixture()
def burnt_study(tmp_path: Path) -> Path:
    folder = tmp_path / "us"
    slices = []
    font = ImageFont.load_default(size=26)
    for _ in range(5):
        image = Image.new("I", (256, 256), 0)
        ImageDraw.Draw(image).text((20, 30), "MULLER HANS", fill=1000, font=font)
        slices.append(np.asarray(image, dtype=np.int32))
    write_dicom_series(folder, np.stack(slices).astype(np.int16), "2.25.7766554433", "screen", 1)
    for f in folder.iterdir():
        ds = pydicom.dcmread(f)
        ds.PatientName, ds.BurnedInAnnotation, ds.SpecificCharacterSet = NAME, "YES", "ISO_IR 192"
        ds.save_as(f)
    return folder


def test_the_remote_service_gets_the_burnt_in_name_blanked(
    burnt_study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openai

    monkeypatch.setenv("MEDCOPILOT_OPTIN", str(tmp_path / "optin.json"))
    assert Redactor(study_identifiers(burnt_study, {"volumes": ["."]}, "radiology")).found_in("MULLER") == ["MULLER"]
    study = study_for(str(burnt_study))
    session = open_study(study, tmp_path / "trace")
    fake = FakeOpenAI([{"content": "A screen capture."}])
    asked: list[str] = []
    try:
        settings = model_settings("openai", base_url="https://models.example.org/v1", max_retries=0)
        client = openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
        policy = conversation(settings, study, session.kind, ask=lambda text: asked.append(text) or True,
                              client=client)  # fmt: skip
        model = PanelModel(session, study)
        model.run_episode(policy, "What does it show?")
        assert model.wait(60)
    finally:
        session.close({"status": "test"})
        fake.stop()
    assert len(asked) == 2 and "burnt into its pixels (BurnedInAnnotation YES)" in asked[1]  # opt-in, then series
    urls = [p["image_url"]["url"] for body in fake.bodies for m in json.loads(body)["messages"]
            if isinstance(m.get("content"), list) for p in m["content"] if p.get("type") == "image_url"]  # fmt: skip
    assert urls
    for url in urls:
        assert "muller" not in _read(base64.b64decode(url.split(",", 1)[1]))
    blanked = [e for e in session.trace_events() if e.get("type") == "image_text_blanked"]
    assert blanked and all(e["words"] >= 1 for e in blanked)


def test_a_host_conversation_reads_its_images_before_a_remote_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot.host.conversation import scrubbed
    from copilot.pacs.patient import PatientFacts
    from copilot.panel import optin

    monkeypatch.setenv("MEDCOPILOT_OPTIN", str(tmp_path / "optin.json"))
    optin.grant("https://models.example.org/v1", ["text", "views"])

    class Agent:
        scrub: Any = None

    notes: list[tuple[str, dict[str, Any]]] = []
    facts = PatientFacts(name="MÜLLER^HANS", patient_id="PAT-4471-0932")
    build = scrubbed(Agent, lambda: facts, lambda: "https://models.example.org/v1", lambda k, p: notes.append((k, p)))
    agent = build()
    png = _png(lambda d: d.text((40, 60), "MULLER HANS", fill=230, font=ImageFont.load_default(size=22)))
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    [part] = agent.scrub([{"type": "image_url", "image_url": {"url": url}}])
    assert "muller" not in _read(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))
    assert [k for k, _ in notes] == ["image_text_blanked"]
