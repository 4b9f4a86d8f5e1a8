"""Free-text `key=…` pairs and provider API keys pasted anywhere (a clinician's note, a model's answer, an error)
never reach a trace: they are cut out by their shape, whatever the field, while ordinary words stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from copilot.trace.recorder import TraceRecorder
from copilot.trace.redact import REDACTED, redact_text

OPENAI = "sk-proj-Q3vT9xLm2Rk7Wb1Yz8Ha4Nc6Df0Gj5Pe"
ANTHROPIC = "sk-ant-api03-Zx81Kq-Lm92Rt7Wb1Yz8Ha4Nc6Df0Gj5Pe"
GOOGLE = "AIzaSyB1c2D3e4F5g6H7i8J9k0L1m2N3o4P5q6R"


@pytest.mark.parametrize(
    ("text", "kept"),
    [(f"use {OPENAI} for now", "use [redacted] for now"), (f"key: {ANTHROPIC}.", "key: [redacted]."),
     (f'"{GOOGLE}"', '"[redacted]"'), ("curl -d key=AbC123xyz https://x", f"curl -d key={REDACTED} https://x"),
     ("sig=deadbeef, pw=hunter2", f"sig={REDACTED}, pw={REDACTED}")],
)  # fmt: skip
def test_keys_are_cut_by_their_shape(text: str, kept: str) -> None:
    assert redact_text(text) == kept


@pytest.mark.parametrize("text", ["monkey=3 keyboard=ok", "error code=pacs_failed", "a risk-averse approach",
                                  "sk-short", "the desk-side-monitor-of-the-reading-room"])  # fmt: skip
def test_ordinary_text_stays(text: str) -> None:
    assert redact_text(text) == text


def test_no_pasted_key_reaches_the_trace(tmp_path: Path) -> None:
    rec = TraceRecorder(tmp_path / "t", {"case_id": "x"})
    rec.record("clinician_instruction", {"text": f"my key is {OPENAI}; try key=s3cr3tvalue", "policy": GOOGLE})
    rec.close({"answer": f"done with {ANTHROPIC}"})
    text = (tmp_path / "t" / "trace.jsonl").read_text(encoding="utf-8")
    for secret in (OPENAI, ANTHROPIC, GOOGLE, "s3cr3tvalue"):
        assert secret not in text
    assert text.count(REDACTED) == 4
