"""The chat agent through the real `openai` client against a scripted OpenAI-compatible server: several
rounds scored and replayed, fault handling, the round budget, one tool per round for pathology."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copilot.agent.loop import BUDGET_MESSAGE, ChatAgent
from copilot.agent.settings import AgentSettings
from copilot.medflow import make_cases
from copilot.medflow.bench_run import run_batch, run_episode
from copilot.replay import replay
from tests.fake_openai import FakeOpenAI, images_in, tool
from tests.oracle import evidence_block, perfect_evidence


def _agent(fake: FakeOpenAI, waits: list[float] | None = None, **kw) -> ChatAgent:
    values = {
        "base_url": fake.base_url,
        "api_key": "test",
        "model": "scripted-model",
        "timeout_s": 0.6,
        "max_retries": 2,
        "backoff_base_s": 0.01,
        "backoff_cap_s": 2.0,
        "wall_clock_s": 120,
        "prices": {"scripted-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
    }
    settings = AgentSettings(**{**values, **kw})
    return ChatAgent(settings, sleep=(waits.append if waits is not None else (lambda s: None)))


def _events(trace_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (trace_dir / "trace.jsonl").read_text().splitlines()]


def _run(case: Path, agent: ChatAgent, out: Path, budget: int = 20) -> dict:
    return run_episode(str(case), agent.name, str(out), budget=budget, trace_dir=out / "trace", policy=agent)


def test_scripted_model_drives_the_viewer_and_is_scored(brain_case: Path, tmp_path: Path) -> None:
    slices, ras = perfect_evidence(brain_case)
    final = f"The lesion rim enhances.\n{evidence_block(slices, ras)}ANSWER: A"
    fake = FakeOpenAI(
        [
            {"tool_calls": [tool("select_volume", {"volume_name": "T1c", "view": "red", "size": 128})]},
            {"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": slices["S"], "size": 128})]},
            {"tool_calls": [tool("jump", {"ras": list(ras), "size": 96})]},
            {"content": final},
        ]
    )
    try:
        row = _run(brain_case, _agent(fake), tmp_path)
    finally:
        fake.stop()
    assert (row["status"], row["rounds"], row["task"], row["strict"], row["loc"]) == ("done", 3, 1.0, 1.0, 1.0)
    first = fake.requests[0]
    assert first["messages"][0]["role"] == "system" and images_in(first) == 3  # baseline views attached
    assert {t["function"]["name"] for t in first["tools"]} >= {"observe", "image_coords_to_ras", "record_point"}
    assert images_in(fake.requests[1]) == 3 + 1 and images_in(fake.requests[3]) == 3 + 1 + 1 + 3  # views returned
    tool_msgs = [m for m in fake.requests[3]["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"])["ok"] for m in tool_msgs] == [True, True, True]
    events = _events(tmp_path / "trace")
    turns = [e for e in events if e["type"] == "model_turn"]
    assert len(turns) == 4 and turns[0]["usage"] == {
        "prompt_tokens": 1000, "completion_tokens": 50, "input_tokens": 1000, "output_tokens": 50, "cached_tokens": 0,
        "reasoning_tokens": 0}
    assert turns[0]["cost_usd"] == pytest.approx(1000 * 1e-6 + 50 * 2e-6) and turns[0]["latency_ms"] > 0
    assert [e["handler"] for e in events if e.get("actor") == "agent"] == ["select_volume", "set_slice_offset", "jump"]
    assert replay(tmp_path / "trace").ok
    process = row["process"]  # the process measures: a clean episode, its model turns totalled
    assert "measures_error" not in process and process["failures"] == []
    assert process["usage"]["prompt_tokens"] == sum(t["usage"]["prompt_tokens"] for t in turns)
    assert process["stages"][-1]["stage"] == "diagnose"


def test_transport_faults_are_retried(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI(
        [
            {"status": 500},
            {"status": 429, "retry_after": 1.5},
            {"stall_s": 1.5, "content": "too late"},  # longer than the client's 0.6 s timeout
            {"tool_calls": [tool("ping")]},
            {"content": "ANSWER: C"},
        ]
    )
    waits: list[float] = []
    try:
        row = _run(brain_case, _agent(fake, waits, max_retries=3), tmp_path)
    finally:
        fake.stop()
    assert row["status"] == "done" and row["rounds"] == 1 and "ANSWER: C" in row["response"]
    retries = [e for e in _events(tmp_path / "trace") if e["type"] == "model_retry"]
    assert [r["status"] for r in retries] == [500, 429, None] and all(r["kind"] == "retryable" for r in retries)
    assert "timed out" in retries[2]["error"]
    assert waits[1] == 1.5  # Retry-After honoured
    assert waits[0] == pytest.approx(0.01) and waits[2] == pytest.approx(0.04)  # capped exponential backoff


def test_model_mistakes_go_back_as_tool_errors(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI(
        [
            {"tool_calls": [tool("set_slice_offset", '{"view": "red", "offset": ')]},  # malformed JSON
            {"tool_calls": [tool("delete_everything", {})]},  # unknown tool
            {"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": "ten"})]},  # schema violation
            {"content": "ANSWER: A"},
        ]
    )
    try:
        row = _run(brain_case, _agent(fake), tmp_path)
    finally:
        fake.stop()
    assert row["status"] == "done" and row["rounds"] == 3
    codes = [json.loads(m["content"])["error"]["code"] for m in fake.requests[3]["messages"] if m["role"] == "tool"]
    assert codes == ["malformed_arguments", "unknown_handler", "invalid_arguments"]
    events = _events(tmp_path / "trace")
    assert [e["kind"] for e in events if e["type"] == "model_error"] == ["malformed_arguments"]
    assert [e["error"]["code"] for e in events if e["type"] == "handler_call" and e["actor"] == "agent"] == [
        "unknown_handler",
        "invalid_arguments",
    ]


def test_persistent_failure_ends_the_episode_with_error(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI([{"status": 503}])
    try:
        row = _run(brain_case, _agent(fake), tmp_path)
    finally:
        fake.stop()
    assert row["status"] == "error" and "failed 3 times" in row["error"] and row["task"] == 0.0
    assert len(fake.requests) == 3
    assert [e["type"] for e in _events(tmp_path / "trace")][-3:] == ["agent_error", "score", "episode_end"]


def test_budget_is_enforced_to_the_round(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI(lambda body: {"content": "ANSWER: B"} if "tools" not in body else {"tool_calls": [tool("ping")]})
    try:
        row = _run(brain_case, _agent(fake), tmp_path, budget=3)
    finally:
        fake.stop()
    assert row["status"] == "budget_exhausted" and row["rounds"] == 3 and "ANSWER: B" in row["response"]
    agent_calls = [e for e in _events(tmp_path / "trace") if e.get("actor") == "agent"]
    assert len(agent_calls) == 3
    last = fake.requests[-1]
    assert "tools" not in last and last["messages"][-1]["content"] == BUDGET_MESSAGE
    assert len(fake.requests) == 3 + 1  # three tool rounds, then the answer-now request


@pytest.fixture(scope="module")
def slide_cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("slides")
    make_cases("breast_wsi", 1, 1, out, slide_size=(1024, 768), mpp=2.0)
    return out


def test_pathology_executes_one_tool_per_round(slide_cases: Path, tmp_path: Path) -> None:
    case = next(slide_cases.iterdir())
    fake = FakeOpenAI(
        [
            {"tool_calls": [tool("zoom", {"direction": "in", "amount": 2}), tool("pan", {"direction": "left"})]},
            {"tool_calls": [tool("viewer_point_to_wsi_coordinate", {"x": 500, "y": 500})]},
            {"content": '{"wsi_label": "N", "localizations": []}'},
        ]
    )
    try:
        row = _run(case, _agent(fake), tmp_path)
    finally:
        fake.stop()
    assert row["status"] == "done" and row["rounds"] == 2
    events = _events(tmp_path / "trace")
    assert [e["handler"] for e in events if e.get("actor") == "agent"] == ["zoom", "viewer_point_to_wsi_coordinate"]
    second = fake.requests[1]["messages"]
    tool_msgs = [json.loads(m["content"]) for m in second if m["role"] == "tool"]
    assert tool_msgs[0]["ok"] is True and tool_msgs[1]["error"]["code"] == "one_tool_per_round"
    observation = second[-1]
    assert observation["role"] == "user" and "direct state summary" in observation["content"][0]["text"]
    assert images_in({"messages": [observation]}) == 1  # the current screenshot every round


def test_batch_completes_every_episode_when_one_service_fails(tmp_path: Path, monkeypatch) -> None:
    cases = make_cases("brain_mri", 3, 4, tmp_path / "cases", spacing=4.0)
    doomed = cases[1].name

    def route(body: dict) -> dict:
        text = json.dumps(body["messages"][1]["content"][0])
        if doomed in text:
            return {"status": 500}
        return {"content": "ANSWER: A"}

    fake = FakeOpenAI(route)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("MEDCOPILOT_TIMEOUT_S", "5")
    monkeypatch.setenv("MEDCOPILOT_MAX_RETRIES", "1")  # one backoff second; the retry schedule has its own test
    try:
        rows = run_batch(tmp_path / "cases", "openai:scripted-model", tmp_path / "run", workers=1, progress=None)
    finally:
        fake.stop()
    status = {r["case_id"]: r["status"] for r in rows}
    assert status == {c.name: ("error" if c.name == doomed else "done") for c in cases}


def test_wall_clock_limit_asks_for_the_answer(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI(lambda body: {"content": "ANSWER: A"} if "tools" not in body else {"tool_calls": [tool("ping")]})
    try:
        row = _run(brain_case, _agent(fake, wall_clock_s=0.0), tmp_path)
    finally:
        fake.stop()
    assert row["status"] == "timeout" and row["rounds"] == 0 and "ANSWER: A" in row["response"]
    assert len(fake.requests) == 1 and "tools" not in fake.requests[0]


def test_clinician_instruction_reaches_the_model(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI([{"content": "ANSWER: A"}])
    agent = _agent(fake)
    agent.instructions = "Check the left frontal lobe first."
    try:
        _run(brain_case, agent, tmp_path)
    finally:
        fake.stop()
    assert (
        "Clinician's instruction: Check the left frontal lobe first."
        in fake.requests[0]["messages"][1]["content"][0]["text"]
    )
