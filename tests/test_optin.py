"""Nothing leaves the machine before the clinician's explicit yes: per model service and kind of data, asked once,
remembered (owner-only), revocable; a loopback service needs none. A series that may carry burnt-in patient details
is not sent without the clinician's choice for that series."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import numpy as np
import pydicom
import pytest

from copilot.cli import main
from copilot.panel import optin
from copilot.panel.burned_in import burned_in_series
from copilot.panel.studies import study_for
from copilot.study.policies import PolicyUnavailable, conversation, model_settings
from tests.fake_openai import FakeOpenAI
from tests.workstation_data import write_dicom_series

REMOTE = "https://models.example.org/v1"


@pytest.fixture(autouse=True)
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config" / "optin.json"
    monkeypatch.setenv("MEDCOPILOT_OPTIN", str(path))
    return path


def _series(folder: Path, tags: dict[str, str]) -> Path:
    data = np.zeros((3, 16, 16), dtype=np.int16)
    data[1, 4:12, 4:12] = 300
    write_dicom_series(folder, data, f"2.25.{len(str(folder)) * 7919}", "series", 1)
    for f in folder.iterdir():
        ds = pydicom.dcmread(f)
        for key, value in tags.items():
            setattr(ds, key, value)
        ds.save_as(f)
    return folder


def test_asked_once_per_service_remembered_and_revocable(store: Path) -> None:
    asked: list[str] = []

    def yes(text: str) -> bool:
        asked.append(text)
        return True

    optin.ensure("http://127.0.0.1:8000/v1", ("text", "views"), None)  # loopback: nothing to ask
    with pytest.raises(optin.OptInNeeded, match=r"nothing was sent.*medcopilot optin allow https://models"):
        optin.ensure(REMOTE, ("text", "views"), None)
    with pytest.raises(optin.OptInNeeded):
        optin.ensure(REMOTE, ("text", "views"), lambda text: False)
    assert not store.exists()  # a no is not remembered as anything
    optin.ensure(REMOTE, ("text", "views"), yes)
    optin.ensure(REMOTE + "/", ("text", "views"), yes)  # the same service: not asked again
    assert len(asked) == 1 and "It would receive:" in asked[0] and "views: pictures rendered" in asked[0]
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert optin.granted("https://user:pw@MODELS.example.org:443/v1?key=1") == {"text", "views"}
    with pytest.raises(optin.OptInNeeded):
        optin.ensure("https://other.example.org/v1", ("text",), None)  # each service on its own
    assert optin.revoke(REMOTE) and not optin.revoke(REMOTE)
    with pytest.raises(optin.OptInNeeded):
        optin.ensure(REMOTE, ("text",), None)


def test_each_kind_of_data_is_its_own_yes() -> None:
    optin.grant(REMOTE, ["text"])
    asked: list[str] = []
    optin.ensure(REMOTE, ("text",), None)
    optin.ensure(REMOTE, ("text", "views"), lambda text: asked.append(text) or True)
    assert len(asked) == 1 and "views:" in asked[0] and "text:" not in asked[0]
    with pytest.raises(ValueError, match="kinds of data"):
        optin.grant(REMOTE, ["voxels"])
    with pytest.raises(ValueError, match="not a model service URL"):
        optin.grant("ftp://models.example.org", ["text"])


def test_a_conversation_with_a_remote_service_waits_for_the_yes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = study_for(str(_series(tmp_path / "ct", {"Modality": "CT"})))
    settings = model_settings("openai", base_url=REMOTE)
    with pytest.raises(PolicyUnavailable, match="you have not agreed to send text and views"):
        conversation(settings, study, study.kind)
    assert main(["optin", "allow", REMOTE, "--kinds", "text,views"]) == 0
    assert conversation(settings, study, study.kind) is not None
    capsys.readouterr()
    assert main(["optin", "list"]) == 0 and "https://models.example.org/v1  text, views" in capsys.readouterr().out
    assert main(["optin", "revoke", REMOTE]) == 0
    with pytest.raises(PolicyUnavailable):
        conversation(settings, study, study.kind)


def test_chat_with_a_remote_service_and_no_terminal_sends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _series(tmp_path / "ct", {"Modality": "CT"})
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    rc = main(["chat", str(folder), "--ask", "Anything?", "--base-url", REMOTE, "--trace-dir", str(tmp_path / "t")])
    assert rc == 2 and "medcopilot optin allow https://models.example.org/v1" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()  # refused before the study was opened


def test_burned_in_series_are_found_and_not_sent_without_the_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    flagged = _series(tmp_path / "sc", {"Modality": "CT", "BurnedInAnnotation": "YES", "SeriesDescription": "dose"})
    us = _series(tmp_path / "us", {"Modality": "US"})
    clean_us = _series(tmp_path / "us_no", {"Modality": "US", "BurnedInAnnotation": "NO"})
    [found] = burned_in_series(flagged, {"volumes": ["."]})
    assert found.reason == "BurnedInAnnotation YES" and found.label == "#1 dose"
    assert burned_in_series(us, {"volumes": ["."]})[0].reason == "modality US (ultrasound)"
    assert burned_in_series(clean_us, {"volumes": ["."]}) == []
    fake = FakeOpenAI([{"content": "Seen."}])
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    try:
        args = ["chat", str(flagged), "--ask", "Anything?", "--base-url", fake.base_url]
        rc = main([*args, "--trace-dir", str(tmp_path / "t1")])
        err = capsys.readouterr().err
        assert rc == 2 and fake.requests == [] and "burnt into its pixels (BurnedInAnnotation YES)" in err
        study = study_for(str(flagged))
        asked: list[str] = []
        settings = model_settings("openai", base_url=fake.base_url)
        conversation(settings, study, study.kind, ask=lambda text: asked.append(text) or True)
        assert len(asked) == 1 and "send its views to the model anyway?" in asked[0]
        assert main([*args, "--trace-dir", str(tmp_path / "t2")]) == 0 and len(fake.requests) == 1  # remembered
    finally:
        fake.stop()


def test_a_host_conversation_makes_no_agent_before_the_opt_in() -> None:
    from copilot.host.conversation import scrubbed

    made: list[int] = []
    build = scrubbed(lambda: made.append(1) or object(), lambda: None, lambda: REMOTE)
    with pytest.raises(optin.OptInNeeded):
        build()
    assert made == []
    optin.grant(REMOTE, ["text", "views"])
    build()
    assert made == [1]
    local = scrubbed(lambda: made.append(2) or object(), lambda: None, lambda: "http://127.0.0.1:8000/v1")
    local()
    assert made == [1, 2]
