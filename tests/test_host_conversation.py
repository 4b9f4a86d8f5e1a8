"""The host conversation without a host (the embedded viewer): approve, reject with a reason the model reads,
stop, questions and decisions in the trace, calls run on the thread that pumps them, the host registry's
hidden handlers, and the panel state — fast, for `make test-fast`."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from copilot.agent.loop import ChatAgent
from copilot.agent.settings import AgentSettings
from copilot.cases.pack import CasePack
from copilot.host.conversation import HostConversation
from copilot.host.panel import MainThreadCalls, panel_state
from copilot.host.registry import HIDDEN, withhold
from copilot.replay import replay
from copilot.runtime import open_session
from tests.fake_openai import FakeOpenAI, tool

STUDY = CasePack(Path("."), "own-study", "host_radiology", {}, {}, "radiology")


def _conversation(case: Path, base_url: str, trace: Path, calls: Any) -> HostConversation:
    session = open_session(case, trace_dir=trace)
    withhold(session, HIDDEN["radiology"])
    settings = AgentSettings(base_url=base_url, model="m", max_retries=0)
    return HostConversation(session, STUDY, lambda: ChatAgent(settings), budget=5, on_host=calls)


def _until(cond: Any, calls: MainThreadCalls) -> None:
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline
        calls.pump()
        time.sleep(0.005)


def test_reject_with_reason_approve_and_the_trace(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI([
        {"tool_calls": [tool("wl", {"window": 80, "level": 40})]},
        {"tool_calls": [tool("scroll", {"view": "red", "direction": "up", "num_slices": 2})]},
        {"content": "Done: no finding."},
    ])  # fmt: skip
    try:
        calls = MainThreadCalls()
        ran_on: list[str] = []
        conv = _conversation(brain_case, fake.base_url, tmp_path / "t", calls)
        conv.session.subscribe(lambda *_: ran_on.append(threading.current_thread().name))
        turn = conv.ask("Anything abnormal?")
        _until(lambda: conv.pending is not None, calls)
        state = panel_state(conv, ["MR series 1 (MR)"])
        assert state.can_decide and state.pending.startswith("Proposed: wl") and not state.can_ask
        conv.reject("leave my window alone")
        first = conv.pending
        _until(lambda: conv.pending is not None and conv.pending is not first, calls)
        conv.approve()
        _until(lambda: not conv.busy, calls)
        assert turn.status == "done" and turn.answer == "Done: no finding."
        assert set(ran_on) == {threading.current_thread().name}  # every handler call ran on the pumping thread
        tool_reply = next(m for m in fake.requests[1]["messages"] if m["role"] == "tool")
        assert json.loads(tool_reply["content"])["error"] == {
            "code": "rejected_by_clinician", "message": "the clinician rejected this action: leave my window alone"
        }  # fmt: skip
        assert "Anything abnormal?" in json.dumps(fake.requests[0]["messages"])
        assert "open_case" not in {t["function"]["name"] for t in fake.requests[0]["tools"]}
        events = conv.session.trace_events()
        decisions = [(e["handler"], e["decision"], e["reason"]) for e in events if e["type"] == "clinician_decision"]
        assert decisions == [("wl", "reject", "leave my window alone"), ("scroll", "approve", "")]
        assert [e["question"] for e in events if e["type"] == "clinician_question"] == ["Anything abnormal?"]
        lines = panel_state(conv).actions
        assert any("wl: rejected — leave my window alone" in line for line in lines)
        report = conv.export_report(tmp_path / "r.html").read_text()
        assert "Anything abnormal?" in report and "leave my window alone" in report
    finally:
        fake.stop()


def test_stop_ends_the_turn_and_hidden_handlers_are_refused(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI([{"tool_calls": [tool("wl", {"window": 80, "level": 40})]}])
    try:
        calls = MainThreadCalls()
        conv = _conversation(brain_case, fake.base_url, tmp_path / "t", calls)
        before = conv.session.snapshot()["display"]
        conv.ask("window?")
        _until(lambda: conv.pending is not None, calls)
        conv.stop()
        _until(lambda: not conv.busy, calls)
        assert conv.turns[0].status == "stopped" and conv.session.snapshot()["display"] == before
        out = conv.session.call("open_case", {}, actor="clinician")
        assert not out.ok and out.error["code"] == "not_in_track"
        with pytest.raises(ValueError):
            conv.ask("  ")
    finally:
        fake.stop()
    conv.session.close()
    report = replay(tmp_path / "t")  # the trace says which handlers were withheld: the refusal replays as one
    assert report.ok, report.summary()


def test_main_thread_calls_hand_back_results_and_errors() -> None:
    calls = MainThreadCalls()
    out: list[Any] = []

    def worker() -> None:
        out.append(calls(lambda: threading.current_thread().name))
        try:
            calls(lambda: 1 / 0)
        except ZeroDivisionError as exc:
            out.append(type(exc).__name__)

    t = threading.Thread(target=worker, name="agent")
    t.start()
    _until(lambda: len(out) == 2, calls)
    t.join()
    assert out == [threading.current_thread().name, "ZeroDivisionError"]
    assert calls(lambda: 7) == 7  # on the main thread itself: run at once
