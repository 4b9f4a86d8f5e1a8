"""Traces that tell the truth on a full disk: a trace write that fails stops the session with `TraceWriteError`
(named, shown to the clinician), nothing more is done unrecorded, and a trace without its closing event is
reported as truncated by `replay` and `sessions list`, never as ok."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copilot.agent.policy import ScriptedPolicy
from copilot.panel.model import PanelModel
from copilot.replay import replay
from copilot.runtime import open_session
from copilot.session import Session
from copilot.study.sessions import list_sessions
from copilot.trace.recorder import TraceWriteError

SCROLL = {"view": "red", "direction": "up", "num_slices": 1}


def _session(brain_case: Path, trace: Path) -> Session:
    session = open_session(brain_case, track="A", trace_dir=trace)
    assert session.call("scroll", SCROLL).ok
    return session


def _fill_disk(session: Session) -> None:
    """From now on every write of the trace fails as on a full disk."""
    session._trace._fh = open("/dev/full", "w", encoding="utf-8")  # type: ignore[union-attr]  # noqa: SIM115


def test_a_full_disk_stops_the_session_with_a_named_error(brain_case: Path, tmp_path: Path) -> None:
    session = _session(brain_case, tmp_path / "sessions" / "20240101-000000-radiology-abcdef")
    before = session.snapshot()
    _fill_disk(session)
    with pytest.raises(TraceWriteError, match=r"could not be written \(No space left on device\); the session stopped"):
        session.call("scroll", SCROLL)
    moved = session.snapshot()
    with pytest.raises(TraceWriteError):  # nothing more is done unrecorded
        session.call("scroll", SCROLL)
    assert session.snapshot() == moved != before
    with pytest.raises(TraceWriteError):
        session.note("model_turn", {"text": "x"})
    session.close({"status": "done"})  # closing a failed trace does not raise; it stays without its end
    report = replay(tmp_path / "sessions" / "20240101-000000-radiology-abcdef")
    assert not report.ok and "truncated" in report.summary() and report.calls == 2
    (info,) = list_sessions(tmp_path / "sessions")
    assert info.status == "truncated"
    from copilot.panel.timeline import TraceTimeline

    assert TraceTimeline(tmp_path / "sessions" / info.name).truncated  # the desktop's replay knows it too


def test_the_clinician_sees_the_named_error(brain_case: Path, tmp_path: Path) -> None:
    session = _session(brain_case, tmp_path / "trace")
    model = PanelModel(session)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"calls": [{"handler": "scroll", "args": SCROLL}], "answer": "done"}))
    _fill_disk(session)
    model.run_episode(ScriptedPolicy(script), "scroll down")
    assert model.wait(30) and model.status == "error"
    assert any(who == "system" and text.startswith("TraceWriteError: the trace") for who, text in model.messages)


def test_a_trace_cut_short_or_never_closed_is_not_ok(brain_case: Path, tmp_path: Path) -> None:
    session = _session(brain_case, tmp_path / "s" / "20240101-000000-radiology-000001")
    assert not replay(tmp_path / "s" / "20240101-000000-radiology-000001").ok  # not closed: never "ok"
    session.close({"status": "done"})
    assert replay(tmp_path / "s" / "20240101-000000-radiology-000001").ok
    (info,) = list_sessions(tmp_path / "s")
    assert info.status == "done"
    trace = tmp_path / "s" / "20240101-000000-radiology-000001" / "trace.jsonl"
    data = trace.read_bytes()
    trace.write_bytes(data[: len(data) - 40])  # the end event's line cut mid-way
    report = replay(trace.parent)
    assert not report.ok and "not valid JSON" in report.summary()
    (info,) = list_sessions(tmp_path / "s")
    assert info.status == "truncated" and info.kind == "radiology"
