"""Traces as OpenTelemetry GenAI spans: a model-driven episode exported after the fact to an OTLP/JSON file
(span names, GenAI attributes, the chain's hashes, no content), the same spans live to a local OTLP/HTTP receiver
while a session is recorded (`MEDCOPILOT_OTEL=1`), approvals and write attempts as events, bad input refused."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from copilot.agent.loop import ChatAgent
from copilot.agent.settings import AgentSettings
from copilot.cli import main
from copilot.medflow.bench_run import run_episode
from copilot.runtime import open_session
from copilot.tools.writes import WritePlan
from copilot.trace.otlp import OtlpError, target_from_env
from tests.fake_openai import FakeOpenAI, tool


class Receiver:
    """An OTLP/HTTP collector on loopback that keeps every request body posted to /v1/traces."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.paths.append(self.path)
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                receiver.bodies.append(json.loads(body))
                answer = b'{"partialSuccess": {}}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def spans(self) -> list[dict[str, Any]]:
        return [s for b in self.bodies for r in b["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _spans(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for r in request["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]


def _attrs(span_or_event: dict[str, Any]) -> dict[str, Any]:
    def plain(v: dict[str, Any]) -> Any:
        if "arrayValue" in v:
            return [plain(x) for x in v["arrayValue"]["values"]]
        (kind, x), = v.items()
        return int(x) if kind == "intValue" else x

    return {a["key"]: plain(a["value"]) for a in span_or_event["attributes"]}


FINAL = "The rim enhances.\nANSWER: A"
PRICES = {"scripted-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}


@pytest.fixture(scope="module")
def episode(brain_case: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model-driven episode (two tool rounds, then the answer) recorded by the chat agent."""
    out = tmp_path_factory.mktemp("otel")
    fake = FakeOpenAI([
        {"tool_calls": [tool("select_volume", {"volume_name": "T1c", "view": "red", "size": 96})]},
        {"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": 12.5, "size": 96}),
                        tool("zoom", {"view": "red", "factor": 999})]},
        {"content": FINAL},
    ])  # fmt: skip
    agent = ChatAgent(AgentSettings(base_url=fake.base_url, api_key="test", model="scripted-model", timeout_s=5,
                                    max_retries=0, prices=PRICES), sleep=lambda s: None)  # fmt: skip
    try:
        run_episode(str(brain_case), agent.name, str(out), budget=5, trace_dir=out / "trace", policy=agent)
    finally:
        fake.stop()
    return out / "trace"


def test_an_episode_exports_as_genai_spans_without_content(episode: Path, tmp_path: Path) -> None:
    out = tmp_path / "spans.json"
    assert main(["trace", "export-otel", str(episode), "--out", str(out)]) == 0
    text = out.read_text()
    request = json.loads(text)
    spans = _spans(request)
    events = [json.loads(line) for line in (episode / "trace.jsonl").read_text().splitlines()]
    start = events[0]
    assert {s["traceId"] for s in spans} == {start["hash"][:32]}  # one trace per episode
    names = [s["name"] for s in spans]
    assert names[-1] == "invoke_agent medcopilot" and names.count("chat scripted-model") == 3
    tools = [s for s in spans if s["name"].startswith("execute_tool ")]
    agent_calls = [e for e in events if e["type"] == "handler_call" and e["actor"] == "agent"]
    assert [s["name"] for s in tools][-3:] == ["execute_tool select_volume", "execute_tool set_slice_offset",
                                               "execute_tool zoom"]  # fmt: skip
    root = spans[-1]
    assert all(s.get("parentSpanId") == root["spanId"] for s in spans[:-1]) and "parentSpanId" not in root
    resource = _attrs(request["resourceSpans"][0]["resource"])
    assert resource["service.name"] == "medcopilot"

    r = _attrs(root)
    assert (r["gen_ai.operation.name"], r["gen_ai.provider.name"], r["gen_ai.request.model"]) == (
        "invoke_agent", "openai", "scripted-model")
    assert r["medcopilot.trace.hash"] == start["hash"] and r["medcopilot.trace.head"] == events[-1]["hash"]
    assert r["medcopilot.module"] == "brain_mri" and r["server.address"] == "127.0.0.1"
    assert {"task_prompt", "agent_start", "final_answer", "score", "episode_end"} <= {e["name"] for e in root["events"]}

    turns = [e for e in events if e["type"] == "model_turn"]
    chats = [s for s in spans if s["name"].startswith("chat ")]
    for chat, turn in zip(chats, turns, strict=True):
        a = _attrs(chat)
        assert chat["kind"] == 3 and a["gen_ai.operation.name"] == "chat"
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (1000, 50)
        assert a["medcopilot.cost_usd"] == pytest.approx(turn["cost_usd"])
        assert a["medcopilot.latency_ms"] == pytest.approx(turn["latency_ms"])
        assert (a["medcopilot.trace.hash"], a["medcopilot.trace.prev"]) == (turn["hash"], turn["prev"])
        assert int(chat["endTimeUnixNano"]) - int(chat["startTimeUnixNano"]) == pytest.approx(
            turn["latency_ms"] * 1e6, abs=1e3)
    ids = [c["id"] for t in turns for c in t["tool_calls"]]
    for span, call, call_id in zip(tools[-3:], agent_calls, ids, strict=True):
        a = _attrs(span)
        assert a["gen_ai.tool.call.id"] == call_id and a["gen_ai.tool.name"] == call["handler"]
        assert (a["medcopilot.actor"], a["medcopilot.result.code"]) == ("agent", call["status"])
        assert a["medcopilot.trace.hash"] == call["hash"]
    zoom = _attrs(tools[-1])  # factor 999 is refused: an error span with its code only
    assert zoom["error.type"] == agent_calls[-1]["error"]["code"] and tools[-1]["status"]["code"] == 2
    assert tools[-1]["status"]["message"] == zoom["error.type"]
    for secret in ("rim enhances", "T1c", '"volume_name"', '"factor"', '"offset"', "base64", "data:image"):
        assert secret not in text  # no answer, arguments, results or images by default


def test_content_is_exported_only_when_asked(episode: Path, tmp_path: Path) -> None:
    out = tmp_path / "spans.json"
    assert main(["trace", "export-otel", str(episode / "trace.jsonl"), "--out", str(out), "--content"]) == 0
    spans = _spans(json.loads(out.read_text()))
    chat = _attrs([s for s in spans if s["name"].startswith("chat ")][-1])
    assert "rim enhances" in chat["gen_ai.output.messages"]
    select = _attrs(next(s for s in spans if s["name"] == "execute_tool select_volume"))
    assert json.loads(select["gen_ai.tool.call.arguments"])["volume_name"] == "T1c"
    assert "data:image" not in out.read_text() and "base64" not in out.read_text()  # images never


def test_export_posts_to_a_collector_and_refuses_a_broken_trace(
    episode: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    receiver = Receiver()
    try:
        assert main(["trace", "export-otel", str(episode), "--endpoint", receiver.url]) == 0
        assert receiver.paths == ["/v1/traces"]
        assert receiver.headers[0]["content-type"] == "application/json"
        n = len(receiver.spans())
        assert f"{n} of {n} spans accepted by {receiver.url}/v1/traces" in capsys.readouterr().out
        broken = tmp_path / "broken"
        broken.mkdir()
        lines = (episode / "trace.jsonl").read_text().splitlines()
        (broken / "trace.jsonl").write_text("\n".join([lines[0], *lines[2:]]) + "\n")  # an event removed
        assert main(["trace", "export-otel", str(broken), "--endpoint", receiver.url]) == 2
        assert "has sequence number 2" in capsys.readouterr().err and len(receiver.bodies) == 1  # nothing sent
    finally:
        receiver.stop()
    assert main(["trace", "export-otel", str(episode), "--endpoint", receiver.url]) == 1  # the collector is gone
    assert "not reachable" in capsys.readouterr().err


def test_live_export_sends_the_same_spans_with_approvals_and_writes(
    brain_case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = Receiver()
    monkeypatch.setenv("MEDCOPILOT_OTEL", "1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=radiology,authorization=Bearer%20k1")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "reading-room-7")
    try:
        session = open_session(brain_case, trace_dir=tmp_path / "trace")
        session.call("scroll", {"view": "red", "num_slices": 2}, actor="clinician")
        plan = WritePlan("export_evidence_sr", "a measurement report", ("https://pacs.example/dicomweb",))
        session.note("clinician_rejection", {"handler": "export_evidence_sr", "reason": "not this study"})
        session.note_declined_write(plan, {"output_name": "sr1"}, "agent", "rejected")
        session.close({"status": "done"})
    finally:
        receiver.stop()
    assert receiver.headers[0]["x-team"] == "radiology" and receiver.headers[0]["authorization"] == "Bearer k1"
    live = receiver.spans()
    names = [s["name"] for s in live]
    assert names == ["execute_tool open_case", "execute_tool scroll", "invoke_agent medcopilot"]
    assert _attrs(receiver.bodies[0]["resourceSpans"][0]["resource"])["service.name"] == "reading-room-7"
    root = live[-1]
    events = {e["name"]: _attrs(e) for e in root["events"]}
    write = events["write_attempt"]
    assert (write["medcopilot.handler"], write["medcopilot.decision"], write["medcopilot.actor"]) == (
        "export_evidence_sr", "rejected", "agent")
    assert "medcopilot.destinations" not in write and "medcopilot.reason" not in events["clinician_rejection"]
    assert _attrs(live[1])["medcopilot.actor"] == "clinician"
    # the after-the-fact export of the same trace gives the same spans
    monkeypatch.delenv("MEDCOPILOT_OTEL")
    out = tmp_path / "spans.json"
    assert main(["trace", "export-otel", str(tmp_path / "trace"), "--out", str(out)]) == 0
    again = _spans(json.loads(out.read_text()))
    assert [(s["spanId"], s["name"], s["attributes"]) for s in again] == [
        (s["spanId"], s["name"], s["attributes"]) for s in live]


def test_a_trace_cut_short_exports_its_episode_marked_incomplete(episode: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut"
    cut.mkdir()
    lines = (episode / "trace.jsonl").read_text().splitlines()
    (cut / "trace.jsonl").write_text("\n".join(lines[:6]) + "\n")  # a valid chain that never reached its end
    out = tmp_path / "spans.json"
    assert main(["trace", "export-otel", str(cut), "--out", str(out)]) == 0
    root = _spans(json.loads(out.read_text()))[-1]
    assert root["name"] == "invoke_agent medcopilot" and _attrs(root)["medcopilot.trace.incomplete"] is True
    assert int(root["endTimeUnixNano"]) == round(json.loads(lines[5])["time"] * 1e9)  # ended at its last event


def test_collector_settings_are_checked(capsys: pytest.CaptureFixture[str], episode: Path) -> None:
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}
    assert target_from_env(env).url == "http://c:4318/custom"  # the signal's own endpoint is used as it is
    assert target_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c/otel/"}).url == "https://c/otel/v1/traces"
    assert target_from_env({"OTEL_EXPORTER_OTLP_TIMEOUT": "2500"}, "http://c").timeout_s == 2.5
    for bad in ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, {"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, {}):
        with pytest.raises(OtlpError):
            target_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", **bad} if bad else bad)
    with pytest.raises(OtlpError, match="not an http"):
        target_from_env({}, "ftp://c")
    assert main(["trace", "export-otel", str(episode), "--endpoint", "file:///tmp/x"]) == 2
    assert "not an http(s) collector URL" in capsys.readouterr().err
