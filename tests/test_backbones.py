"""The paper's backbones on their own services' rules: one scripted six-round brain episode through each
provider-faithful fake (tests/provider_fakes.py cites the pages and dates), the same Task, Strict and Loc everywhere;
what each request carried checked against what the service accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from copilot.agent.loop import ChatAgent
from copilot.agent.settings import AgentSettings
from copilot.medflow.bench_run import run_episode
from tests.fake_openai import FakeOpenAI, images_in, tool
from tests.oracle import evidence_block, perfect_evidence
from tests.provider_fakes import (
    FakeResponses,
    FakeVLLM,
    JsonForStream,
    ReasoningChat,
    StrictGemini,
    ThinkingAnthropic,
)


def script(case: Path) -> list[dict[str, Any]]:
    """Six tool rounds (each returning a view), then the answer with perfect evidence."""
    slices, ras = perfect_evidence(case)
    final = f"The rim enhances on the contrast series.\n{evidence_block(slices, ras)}ANSWER: A"
    return [
        {"tool_calls": [tool("select_volume", {"volume_name": "T1c", "view": "red", "size": 96})]},
        {"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": slices["S"], "size": 96})]},
        {"tool_calls": [tool("set_slice_offset", {"view": "yellow", "offset": slices["R"], "size": 96})]},
        {"tool_calls": [tool("set_slice_offset", {"view": "green", "offset": slices["A"], "size": 96})]},
        {"tool_calls": [tool("select_volume", {"volume_name": "FLAIR", "view": "red", "size": 96})]},
        {"tool_calls": [tool("jump", {"ras": list(ras), "size": 96})]},
        {"content": final, "chunks": 4},
    ]


def settings(provider: str, model: str, base_url: str, **kw: Any) -> AgentSettings:
    values: dict[str, Any] = {
        "provider": provider,
        "model": model,
        "base_url": base_url,
        "api_key": "test-key",
        "timeout_s": 5.0,
        "round_deadline_s": 10.0,
        "max_retries": 2,
        "backoff_base_s": 0.01,
        "wall_clock_s": 120,
    }
    return AgentSettings(**{**values, **kw})


def episode(case: Path, folder: Path, agent: ChatAgent) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    row = run_episode(str(case), agent.name, str(folder), trace_dir=folder / "trace", policy=agent)
    events = [json.loads(line) for line in (folder / "trace" / "trace.jsonl").read_text().splitlines()]
    return row, events


def scores(row: dict[str, Any]) -> tuple[Any, ...]:
    return row["status"], row["rounds"], row["task"], row["strict"], row["loc"]


DONE = ("done", 6, 1.0, 1.0, 1.0)


def test_gpt5_on_chat_completions_gets_no_temperature_nor_max_tokens(brain_case: Path, tmp_path: Path) -> None:
    fake = ReasoningChat(script(brain_case))
    try:
        agent = ChatAgent(settings("openai", "gpt-5.5", fake.base_url, wire="openai-chat"))
        row, events = episode(brain_case, tmp_path, agent)
    finally:
        fake.stop()
    assert scores(row) == DONE and fake.refusals == []
    assert all("temperature" not in b and "max_tokens" not in b for b in fake.requests)
    assert all(b["max_completion_tokens"] == 4096 for b in fake.requests)
    start = next(e for e in events if e["type"] == "agent_start")
    assert start["profile"]["id"] == "openai-gpt-5" and start["request"]["temperature"] is None
    assert start["wire"] == "openai-chat"


def test_the_fake_refuses_what_the_service_refuses(brain_case: Path, tmp_path: Path) -> None:
    """The emulator is not an echo: the request the product used to send (temperature 0) is refused, and the episode
    ends in error with the service's words, not as an empty answer."""
    fake = ReasoningChat(script(brain_case))
    try:
        agent = ChatAgent(settings("openai", "gpt-5.5", fake.base_url, wire="openai-chat"))
        agent.profile = agent.wire.profile = type(agent.profile)(**{**agent.profile.__dict__, "temperature": True})
        row, _ = episode(brain_case, tmp_path, agent)
    finally:
        fake.stop()
    assert row["status"] == "error" and "unsupported_value" in row["error"] and row["rounds"] == 0


def test_gpt5_on_the_responses_api_round_trips_its_reasoning(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeResponses(script(brain_case))
    try:
        agent = ChatAgent(settings("openai", "gpt-5.5", fake.base_url, wire="openai-responses", reasoning="high"))
        row, events = episode(brain_case, tmp_path, agent)
    finally:
        fake.stop()
    assert scores(row) == DONE and fake.refusals == []
    assert [p for p in fake.paths] == ["/v1/responses"] * 7
    for n, body in enumerate(fake.requests):
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        assert body["reasoning"] == {"effort": "high"} and "temperature" not in body
        carried = [i["encrypted_content"] for i in body["input"] if i.get("type") == "reasoning"]
        assert len(carried) == n  # every earlier turn's reasoning, exactly as given
    turns = [e for e in events if e["type"] == "model_turn"]
    assert turns[0]["usage"]["reasoning_tokens"] == 30 and turns[0]["usage"]["cached_tokens"] == 200
    assert turns[0]["model_version"] == "gpt-5.5-2026-04-23"
    start = next(e for e in events if e["type"] == "agent_start")
    assert start["wire"] == "openai-responses" and start["request"]["reasoning"] == "high"


def test_gemini_3_gets_every_signature_back(brain_case: Path, tmp_path: Path) -> None:
    fake = StrictGemini(script(brain_case))
    try:
        agent = ChatAgent(settings("gemini", "gemini-3.1-pro-preview", fake.base_url, reasoning="high"))
        row, events = episode(brain_case, tmp_path, agent)
    finally:
        fake.stop()
    assert scores(row) == DONE and fake.refusals == []
    last = fake.requests[-1]
    signed = [
        p["thoughtSignature"]
        for c in last["contents"]
        if c["role"] == "model"
        for p in c["parts"]
        if "functionCall" in p
    ]
    assert len(signed) == 6 and all(signed)
    config = last["generationConfig"]
    assert "temperature" not in config  # the SDK's own spelling of the level, as Google's API takes it
    assert config["thinkingConfig"] in ({"thinkingLevel": "HIGH"}, {"thinking_level": "HIGH"})
    turns = [e for e in events if e["type"] == "model_turn"]
    assert turns[0]["usage"]["reasoning_tokens"] == 40 and turns[0]["usage"]["output_tokens"] == 90


def test_a_gemini_history_rebuilt_without_signatures_is_refused(brain_case: Path, tmp_path: Path) -> None:
    """The old translation (parts rebuilt from our own message) loses the signature: the fake refuses round 2."""
    fake = StrictGemini(script(brain_case))
    try:
        agent = ChatAgent(settings("gemini", "gemini-3.1-pro-preview", fake.base_url, max_retries=0))
        original = agent.wire.complete

        def forgetful(request: Any, on_text: Any = None) -> Any:
            for m in request.messages:
                m.pop("provider_state", None)
            return original(request, on_text)

        agent.wire.complete = forgetful  # type: ignore[method-assign]
        row, _ = episode(brain_case, tmp_path, agent)
    finally:
        fake.stop()
    assert row["status"] == "error" and "thought_signature" in row["error"] and row["rounds"] == 1


def test_claude_with_thinking_gets_its_thinking_blocks_back(brain_case: Path, tmp_path: Path) -> None:
    fake = ThinkingAnthropic(script(brain_case))
    try:
        agent = ChatAgent(settings("anthropic", "claude-opus-4-7", fake.base_url, reasoning="4096"))
        row, _events = episode(brain_case, tmp_path, agent)
    finally:
        fake.stop()
    assert scores(row) == DONE and fake.refusals == []
    assert all(b["thinking"] == {"type": "enabled", "budget_tokens": 4096} for b in fake.requests)
    assert all(b["max_tokens"] > 4096 and "temperature" not in b for b in fake.requests)
    assistant = [m for m in fake.requests[-1]["messages"] if m["role"] == "assistant"]
    assert len(assistant) == 6 and all(m["content"][0]["type"] == "thinking" for m in assistant)


def test_claude_requests_stay_within_the_documented_images(brain_case: Path, tmp_path: Path) -> None:
    """120 images in the conversation: the request carries the newest 100, the documented maximum."""
    fake = ThinkingAnthropic([{"content": "ANSWER: A"}])
    try:
        agent = ChatAgent(settings("anthropic", "claude-sonnet-4-6", fake.base_url))
        png = "data:image/png;base64,iVBORw0KGgo="
        user = [{"type": "text", "text": "views"}, *[{"type": "image_url", "image_url": {"url": png}}] * 120]

        class Quiet:
            def note(self, *_: Any) -> None: ...

        agent._complete(Quiet(), [{"role": "user", "content": user}], None, 1, 1e12)  # type: ignore[arg-type]
    finally:
        fake.stop()
    assert fake.refusals == []
    assert sum(1 for b in fake.requests[0]["messages"][0]["content"] if b["type"] == "image") == 100


@pytest.mark.parametrize("limit", [4, 2])
def test_a_vllm_image_limit_is_met_once_and_traced(brain_case: Path, tmp_path: Path, limit: int) -> None:
    fake = FakeVLLM(script(brain_case), image_limit=limit)
    try:
        agent = ChatAgent(settings("local", "Qwen/Qwen3.5-9B", fake.base_url))
        row, events = episode(brain_case, tmp_path, agent)
    finally:
        fake.stop()
    assert scores(row) == DONE and len(fake.refusals) == 1
    adapted = [e for e in events if e["type"] == "model_adapted"]
    assert len(adapted) == 1 and adapted[0]["max_images"] == limit and adapted[0]["refusal"] == "image_limit"
    assert max(images_in(b) for b in fake.requests[-3:]) <= limit
    assert any(e["type"] == "images_dropped" for e in events)


def test_a_vllm_context_limit_is_met_once(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeVLLM(script(brain_case), max_model_len=9000, tokens_per_image=1300)
    try:
        agent = ChatAgent(settings("local", "Qwen/Qwen3.5-9B", fake.base_url, max_tokens=2048))
        row, events = episode(brain_case, tmp_path, agent)
    finally:
        fake.stop()
    assert scores(row) == DONE
    assert [e["refusal"] for e in events if e["type"] == "model_adapted"] == ["context"]


def test_a_model_without_native_tools_runs_on_the_text_protocol(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeVLLM(script(brain_case), model="google/medgemma-27b-it", tool_parser=False)
    try:
        agent = ChatAgent(settings("local", "google/medgemma-27b-it", fake.base_url))
        row, events = episode(brain_case, tmp_path, agent)
    finally:
        fake.stop()
    assert scores(row) == DONE and fake.refusals == []
    assert all("tools" not in b for b in fake.requests)
    assert "<tool_call>" in fake.requests[0]["messages"][0]["content"]
    calls = [e for e in events if e["type"] == "handler_call" and e["actor"] == "agent"]
    assert len(calls) == 6 and all(e["tool_call_id"].startswith("call_") for e in calls)
    start = next(e for e in events if e["type"] == "agent_start")
    assert start["request"]["tool_protocol"] == "text" and start["wire"] == "openai-chat+text-tools"


def test_a_server_without_a_tool_parser_is_adapted_to_or_named(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeVLLM(script(brain_case), tool_parser=False)
    try:
        row, events = episode(
            brain_case, tmp_path / "a", ChatAgent(settings("local", "Qwen/Qwen3.5-9B", fake.base_url))
        )
        strict = ChatAgent(settings("local", "Qwen/Qwen3.5-9B", fake.base_url, adapt=False))
        refused, _ = episode(brain_case, tmp_path / "b", strict)
    finally:
        fake.stop()
    assert scores(row) == DONE
    assert [e["tool_protocol"] for e in events if e["type"] == "model_adapted"] == ["text"]
    assert refused["status"] == "error" and "--enable-auto-tool-choice" in refused["error"]


def test_a_stream_answered_with_json_is_read_not_scored_empty(brain_case: Path, tmp_path: Path) -> None:
    fake = JsonForStream(script(brain_case))
    try:
        row, events = episode(brain_case, tmp_path, ChatAgent(settings("local", "Qwen/Qwen3.5-9B", fake.base_url)))
    finally:
        fake.stop()
    assert scores(row) == DONE
    retries = [e for e in events if e["type"] == "model_retry"]
    assert len(retries) == 1 and "no events" in retries[0]["error"]


def test_an_empty_reply_ends_the_episode_as_an_error(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI([{"content": ""}])
    try:
        row, _ = episode(brain_case, tmp_path, ChatAgent(settings("local", "Qwen/Qwen3.5-9B", fake.base_url)))
    finally:
        fake.stop()
    assert row["status"] == "error" and "empty" in row["error"] and len(fake.requests) == 3  # retried twice


def test_calls_past_the_turn_limit_and_huge_arguments_are_bounded(brain_case: Path, tmp_path: Path) -> None:
    many = [tool("ping")] * 200 + [tool("ping", {"x": "y" * 40_000})]
    fake = FakeOpenAI([{"tool_calls": many}, {"content": "ANSWER: A"}])
    try:
        row, events = episode(brain_case, tmp_path, ChatAgent(settings("local", "Qwen/Qwen3.5-9B", fake.base_url)))
    finally:
        fake.stop()
    assert row["status"] == "done"
    ran = [e for e in events if e["type"] == "handler_call" and e["actor"] == "agent"]
    assert len(ran) == 32
    assert "y" * 1000 not in fake.bodies[1].decode()  # the refused argument is not sent again
    turn = next(e for e in events if e["type"] == "model_turn")
    assert turn["tool_calls_total"] == 201 and len(turn["tool_calls"]) == 32


def test_docs_give_a_spec_for_every_backbone_of_the_paper() -> None:
    from copilot.llm.profiles import all_profiles, profile_for

    doc = (Path(__file__).resolve().parent.parent / "docs" / "models.md").read_text(encoding="utf-8")
    table1 = ["GPT-5.4 mini", "GPT-5.5", "Gemini 3 Flash Preview", "Gemini 3.1 Pro Preview", "Claude Sonnet 4.6",
              "Claude Opus 4.7", "Qwen3.5 4B / 9B / 27B / 35B-A3B", "Gemma 3 27B IT", "MedGemma 1.5 4B IT",
              "MedGemma 27B IT", "Lingshu-32B"]  # fmt: skip
    assert all(name in doc for name in table1)
    for profile in all_profiles():
        for backbone in profile.backbones:
            hosted = {"openai-gpt-5": "openai", "gemini-3": "gemini", "claude-4": "anthropic"}
            provider = hosted.get(profile.id, "local")
            assert profile_for(provider, backbone).id == profile.id, backbone
            assert backbone.rsplit("/", 1)[-1].lower() in doc.lower(), backbone
        for server, command in profile.serve.items():
            assert server in ("vllm", "sglang", "ollama", "llama.cpp", "lmstudio")
            if server == "vllm" and profile.tools == "native":
                assert "--enable-auto-tool-choice --tool-call-parser" in command
