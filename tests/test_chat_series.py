"""`chat --series` reads series as the desktop does (several, by number, description word or UID end), and a
PET/CT conversation opens fused by the hanging protocol: the PET over the CT, set by audited system calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copilot.cli import main
from copilot.panel.hanging import load_rules, matching_rule
from tests.fake_openai import FakeOpenAI


@pytest.fixture(scope="module")
def petct(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DICOM study of a CT (#2) and a PET (#3) on one grid, written from a small case pack."""
    from copilot.cases.dicom_study import write_dicom_study
    from tests.workstation_data import petct_case_pack

    root = tmp_path_factory.mktemp("petct")
    case = petct_case_pack(root / "case")
    return write_dicom_study(case, root / "dicom")


def _events(trace: Path) -> list[dict]:
    return [json.loads(line) for line in (trace / "trace.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("series", ["2,3", "CT,PET", "chest,PET"])
def test_a_petct_chat_opens_both_series_fused(petct: Path, tmp_path: Path, series: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    fake = FakeOpenAI([{"content": "The PET shows one focus."}])
    try:
        rc = main(["chat", str(petct), "--series", series, "--ask", "Any uptake?", "--base-url", fake.base_url,
                   "--trace-dir", str(tmp_path / "t")])  # fmt: skip
    finally:
        fake.stop()
    out = capsys.readouterr().out
    assert rc == 0 and "hanging protocol: PET/CT" in out
    events = _events(tmp_path / "t")
    fusion = next(e for e in events if e.get("handler") == "fusion")
    assert fusion["actor"] == "system" and fusion["ok"] and fusion["result"]["foreground_opacity"] == 0.5
    shown = [e["result"] for e in events if e.get("handler") == "get_viewer_state"][-1]
    modality = {v["id"]: v["modality"] for v in shown["inventory"]}
    assert modality[shown["fusion"]["background_volume"]] == "CT"
    assert shown["fusion"]["foreground_volume_name"] == "PET AC"
    assert any(e.get("type") == "hanging_protocol" and e["rule"] == "PET/CT" for e in events)
    assert len(fake.requests) == 1  # the conversation went on with both series open


def test_a_series_named_twice_or_not_at_all_is_refused(petct: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    assert main(["chat", str(petct), "--series", "2,2", "--ask", "x", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "names a series twice" in capsys.readouterr().err
    assert main(["chat", str(petct), "--series", "MR", "--ask", "x", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "matches no series" in capsys.readouterr().err


def test_hanging_rules_are_data_checked_when_read() -> None:
    rules = load_rules()
    assert matching_rule(["CT", "PT"], rules).name == "PET/CT"
    assert matching_rule(["CT"], rules).name == "CT" and matching_rule(["US"], rules) is None
    with pytest.raises(ValueError, match="unknown layout"):
        load_rules({"rules": [{"name": "x", "modalities": ["CT"], "layout": "nine_up"}]})


def test_chat_takes_the_model_options(petct: Path, tmp_path: Path) -> None:
    """`chat --tool-protocol text --max-images 2`: the request offers no native tools, declares them in the system
    prompt and carries at most two images; the trace header records what was sent."""
    fake = FakeOpenAI([{"content": "The PET shows one focus."}])
    try:
        rc = main(["chat", str(petct), "--series", "2,3", "--ask", "Any uptake?", "--base-url", fake.base_url,
                   "--trace-dir", str(tmp_path / "t"), "--tool-protocol", "text", "--max-images", "2"])  # fmt: skip
    finally:
        fake.stop()
    assert rc == 0 and len(fake.requests) == 1
    body = fake.requests[0]
    images = sum(1 for m in body["messages"] if isinstance(m.get("content"), list)
                 for p in m["content"] if p.get("type") == "image_url")  # fmt: skip
    assert "tools" not in body and "<tool_call>" in body["messages"][0]["content"] and images <= 2
    start = next(e for e in _events(tmp_path / "t") if e["type"] == "agent_start")
    assert start["request"]["tool_protocol"] == "text" and start["request"]["max_images"] == 2
