"""The cheap paths of the audit keep its guarantees: the evidence committed once per change still rolls a failed
call back (even one that edited an entry in place), the trace line written once is the canonical one, and the
redaction that skips numbers still reads every string and key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from copilot.engine.volume.viewer import EmbeddedVolumeViewer
from copilot.session import Session
from copilot.tools.registry import HandlerOutput, Registry
from copilot.trace.chain import read_trace
from copilot.trace.recorder import TraceRecorder, canonical_json, event_hash, hashed_line
from copilot.trace.redact import REDACTED, redact, register_secret


def _session(tmp_path: Path) -> Session:
    reg = Registry("radiology")

    @reg.handler(role="evidence_capture")
    def add(ctx: Any, label: Annotated[str, Field(description="The label.")]) -> HandlerOutput:
        """Append an entry."""
        ctx.evidence.append({"evidence_id": len(ctx.evidence) + 1, "label": label, "ras": [1.0, 2.0, 3.0]})
        return HandlerOutput({"n": len(ctx.evidence)})

    @reg.handler(role="evidence_capture")
    def spoil(ctx: Any) -> HandlerOutput:
        """Edit the first entry in place, append one, then fail."""
        ctx.evidence[0]["label"] = "edited"
        ctx.evidence[0]["ras"].append(9.0)
        ctx.evidence.append({"evidence_id": 99})
        raise RuntimeError("boom")

    return Session(EmbeddedVolumeViewer(), reg, tmp_path, trace=TraceRecorder(tmp_path / "trace", {"t": 1}))


def test_failed_call_puts_back_evidence_it_edited_in_place(tmp_path: Path) -> None:
    s = _session(tmp_path)
    assert s.call("add", {"label": "a"}).ok and s.call("add", {"label": "b"}).ok
    before = s.snapshot()
    out = s.call("spoil", {})
    assert not out.ok and out.error is not None and out.error["code"] == "internal_error"
    assert s.snapshot() == before
    assert (
        s.evidence()
        == before["evidence"]
        == [
            {"evidence_id": 1, "label": "a", "ras": [1.0, 2.0, 3.0]},
            {"evidence_id": 2, "label": "b", "ras": [1.0, 2.0, 3.0]},
        ]
    )
    assert s.call("spoil", {}).ok is False  # the committed copy itself was never touched: a second rollback too
    assert s.evidence() == before["evidence"]
    s.close()
    calls = [e for e in read_trace(tmp_path / "trace") if e["type"] == "handler_call"]  # verified chain
    assert [(e["handler"], e["ok"]) for e in calls] == [("add", True)] * 2 + [("spoil", False)] * 2


def test_evidence_copies_and_saved_states_are_independent(tmp_path: Path) -> None:
    s = _session(tmp_path)
    s.call("add", {"label": "a"})
    saved = s.save_state()
    mine = s.evidence()
    mine[0]["label"] = "changed by a reader"
    assert s.evidence()[0]["label"] == "a"
    s.call("add", {"label": "b"})
    assert [e["label"] for e in saved.evidence] == ["a"]
    s.rewind(saved)
    assert [e["label"] for e in s.evidence()] == ["a"]
    assert s.call("add", {"label": "c"}).result == {"n": 2}
    s.call("spoil", {})  # rolls back to the state after the rewind and the call that followed it
    assert [e["label"] for e in s.evidence()] == ["a", "c"]
    assert [e["label"] for e in saved.evidence] == ["a"]
    s.close()


def test_state_text_equals_the_merged_mapping(tmp_path: Path) -> None:
    s = _session(tmp_path)
    s.call("add", {"label": 'quote " and \u2028'})
    snap = s.snapshot()
    assert snap == {**json.loads(json.dumps(s._viewer.state())), "evidence": s.evidence()}
    s.close()


def test_hashed_line_is_the_canonical_line() -> None:
    event = {"seq": 4, "type": "handler_call", "time": 1.5, "prev": "0" * 64, "args": {"ü": [1, 2.5, None]},
             "zeta": "a\u2028b", "Hash": 1, "hasi": True, "actor": "clinician"}  # fmt: skip
    digest, line = hashed_line(event)
    assert digest == event_hash(event)
    assert line == canonical_json({**event, "hash": digest})


def test_redaction_still_reads_every_string_and_key_beside_numbers() -> None:
    register_secret("s3cr3t-value-for-fast-paths")
    value = {
        "ras": [1.0, 2, True, None],
        "mixed": [1.0, "x s3cr3t-value-for-fast-paths y", {"password": 3}],
        "nested": {"api_key": 42, "note s3cr3t-value-for-fast-paths": 1.5, 7: "https://u:p@host/x?token=abc"},
        "tuple": (1, 2),
    }
    out = redact(value)
    assert out["ras"] == [1.0, 2, True, None] and out["tuple"] == [1, 2]
    assert out["mixed"] == [1.0, f"x {REDACTED} y", {"password": REDACTED}]
    url = f"https://{REDACTED}@host/x?token={REDACTED}"
    assert out["nested"] == {"api_key": REDACTED, f"note {REDACTED}": 1.5, 7: url}
    assert "s3cr3t" not in json.dumps(out)
    register_secret("a-later-secret-9")  # a key seen before a new secret is read again
    assert redact({"k a-later-secret-9": 1}) == {f"k {REDACTED}": 1}
    long_key = "x" * 500 + " a-later-secret-9"  # a key too long to be remembered is read all the same
    assert redact({long_key: 1, "y" * 300 + "_token": "v"}) == {
        "x" * 500 + f" {REDACTED}": 1,
        "y" * 300 + "_token": REDACTED,
    }
