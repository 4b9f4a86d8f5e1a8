"""The model seam: the same scripted brain episode through OpenAI chat completions, Anthropic Messages and Gemini,
each on its provider's SDK against a fake server speaking that wire format; streaming, Stop, retries, helpful
errors, usage and cost, and the one policy-spec parser."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pytest

from copilot.agent.loop import ChatAgent
from copilot.agent.settings import AgentSettings
from copilot.llm.prices import price_table
from copilot.llm.spec import SpecError, model_of, parse_policy, service_problem
from copilot.medflow.bench_run import run_episode
from copilot.trace.redact import redact_text
from tests.fake_openai import FakeAnthropic, FakeGemini, FakeOpenAI, tool
from tests.oracle import evidence_block, perfect_evidence

FAKES = {"openai": FakeOpenAI, "anthropic": FakeAnthropic, "gemini": FakeGemini}
PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}


def _settings(provider: str, fake: FakeOpenAI, **kw: object) -> AgentSettings:
    values: dict[str, object] = {"provider": provider, "base_url": fake.base_url, "api_key": "test-key",
                                 "model": "scripted-model", "timeout_s": 5.0, "round_deadline_s": 10.0,
                                 "max_retries": 2, "backoff_base_s": 0.01, "wall_clock_s": 120,
                                 "prices": {f"{provider}:scripted-model": PRICE}}  # fmt: skip
    return AgentSettings(**{**values, **kw})  # type: ignore[arg-type]


def _script(brain_case: Path) -> list[dict]:
    slices, ras = perfect_evidence(brain_case)
    final = f"The rim of the lesion enhances on the contrast series.\n{evidence_block(slices, ras)}ANSWER: A"
    return [
        {"tool_calls": [tool("select_volume", {"volume_name": "T1c", "view": "red", "size": 128})]},
        {"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": slices["S"], "size": 128})]},
        {"content": final, "chunks": 5},
    ]


def _events(trace: Path) -> list[dict]:
    return [json.loads(line) for line in (trace / "trace.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def episodes(brain_case: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, FakeOpenAI, list]]:
    """The scripted episode run once per provider: (result row, the fake with its requests, streamed pieces)."""
    out: dict[str, tuple[dict, FakeOpenAI, list]] = {}
    for provider, cls in FAKES.items():
        fake = cls(_script(brain_case))
        streamed: list[str] = []
        agent = ChatAgent(_settings(provider, fake))
        agent.on_stream = streamed.append
        folder = tmp_path_factory.mktemp(provider)
        try:
            row = run_episode(str(brain_case), agent.name, str(folder), trace_dir=folder / "trace", policy=agent)
        finally:
            fake.stop()
        out[provider] = ({**row, "trace_path": folder / "trace"}, fake, streamed)
    return out


def test_the_same_episode_scores_identically_through_all_three_wire_formats(episodes: dict) -> None:
    scores = {p: (r["status"], r["rounds"], r["task"], r["strict"], r["loc"]) for p, (r, _, _) in episodes.items()}
    assert scores == {p: ("done", 2, 1.0, 1.0, 1.0) for p in FAKES}
    assert {p: r["model"] for p, (r, _, _) in episodes.items()} == {p: "scripted-model" for p in FAKES}
    assert {p: r["policy"] for p, (r, _, _) in episodes.items()} == {p: f"{p}:scripted-model" for p in FAKES}
    for provider, (row, _, _) in episodes.items():
        start = next(e for e in _events(_trace_of(row)) if e["type"] == "agent_start")
        wire = {"openai": "openai-chat", "anthropic": "anthropic-messages", "gemini": "gemini"}[provider]
        assert (start["provider"], start["model"], start["wire"]) == (provider, "scripted-model", wire)


def _trace_of(row: dict) -> Path:
    return Path(row["trace_path"])


def test_openai_requests_carry_images_and_tools_as_chat_completions(episodes: dict) -> None:
    _, fake, _ = episodes["openai"]
    first, last = fake.requests[0], fake.requests[-1]
    assert fake.paths[0] == "/v1/chat/completions" and fake.headers[0]["authorization"] == "Bearer test-key"
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    images = [p for p in first["messages"][1]["content"] if p["type"] == "image_url"]
    assert len(images) == 3 and all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in images)
    decl = next(t for t in first["tools"] if t["function"]["name"] == "set_slice_offset")
    assert decl["type"] == "function" and decl["function"]["parameters"]["type"] == "object"
    assert [m["role"] for m in last["messages"]].count("tool") == 2


def test_anthropic_requests_carry_images_and_tools_natively(episodes: dict) -> None:
    _, fake, _ = episodes["anthropic"]
    first, last = fake.requests[0], fake.requests[-1]
    headers = fake.headers[0]
    assert fake.paths[0] == "/v1/messages" and "anthropic-version" in headers
    assert headers.get("x-api-key") == "test-key" or headers.get("authorization") == "Bearer test-key"
    assert first["stream"] is True and first["max_tokens"] == 4096
    assert isinstance(first["system"], str) and first["system"].strip()
    assert [m["role"] for m in first["messages"]] == ["user"]
    images = [b for b in first["messages"][0]["content"] if b["type"] == "image"]
    assert len(images) == 3 and all(b["source"]["type"] == "base64" and b["source"]["media_type"] == "image/png"
                                    for b in images)  # fmt: skip
    decl = next(t for t in first["tools"] if t["name"] == "set_slice_offset")
    assert set(decl) == {"name", "description", "input_schema"} and decl["input_schema"]["type"] == "object"
    roles = [m["role"] for m in last["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]  # alternating, as the API requires
    use = next(b for b in last["messages"][1]["content"] if b["type"] == "tool_use")
    assert use["name"] == "select_volume" and use["input"]["volume_name"] == "T1c"
    result = last["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == use["id"]
    assert json.loads(result["content"])["ok"] is True


def test_gemini_requests_carry_images_and_tools_natively(episodes: dict) -> None:
    _, fake, _ = episodes["gemini"]
    first, last = fake.requests[0], fake.requests[-1]
    assert re.match(r"/v1(beta)?/models/scripted-model:streamGenerateContent\?alt=sse", fake.paths[0])
    assert fake.headers[0]["x-goog-api-key"] == "test-key"
    assert first["systemInstruction"]["parts"][0]["text"]
    assert [c["role"] for c in first["contents"]] == ["user"]
    images = [p["inlineData"] for p in first["contents"][0]["parts"] if "inlineData" in p]
    assert len(images) == 3 and {i.get("mimeType") or i.get("mime_type") for i in images} == {"image/png"}
    assert all(i["data"] for i in images)
    decls = first["tools"][0]["functionDeclarations"]
    decl = next(d for d in decls if d["name"] == "set_slice_offset")
    schema = decl.get("parametersJsonSchema") or decl.get("parameters_json_schema")
    assert schema["type"] == "object" and "offset" in schema["properties"]
    assert first["generationConfig"]["temperature"] == 0.0
    roles = [c["role"] for c in last["contents"]]
    assert roles == ["user", "model", "user", "model", "user"]
    call = last["contents"][1]["parts"][0]["functionCall"]
    assert call["name"] == "select_volume" and call["args"]["volume_name"] == "T1c"
    response = last["contents"][2]["parts"][0]["functionResponse"]
    assert response["name"] == "select_volume" and response["id"] == call["id"] and response["response"]["ok"]


def test_streamed_text_arrives_in_chunks_on_every_wire(episodes: dict) -> None:
    for provider, (row, _, streamed) in episodes.items():
        assert len(streamed) >= 3, provider
        assert "".join(streamed) == row["response"], provider


def test_cost_is_tokens_times_the_table_price(episodes: dict) -> None:
    for provider, (row, _, _) in episodes.items():
        turns = [e for e in _events(_trace_of(row)) if e["type"] == "model_turn"]
        assert len(turns) == 3
        for t in turns:
            assert (t["usage"]["input_tokens"], t["usage"]["output_tokens"]) == (1000, 50), provider
            assert t["cost_usd"] == pytest.approx(1000 * 1.0e-6 + 50 * 2.0e-6), provider
        final = next(e for e in _events(_trace_of(row)) if e["type"] == "final_answer")
        assert final["usage"]["input_tokens"] == 3000 and final["usage"]["cost_usd"] == pytest.approx(3 * 0.0011)


def test_a_model_without_a_price_shows_tokens_only(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI([{"content": "ANSWER: A"}])
    try:
        agent = ChatAgent(_settings("openai", fake, prices={}, model="unpriced-model"))
        run_episode(str(brain_case), agent.name, str(tmp_path), trace_dir=tmp_path / "t", policy=agent)
    finally:
        fake.stop()
    turn = next(e for e in _events(tmp_path / "t") if e["type"] == "model_turn")
    assert turn["cost_usd"] is None and turn["usage"]["input_tokens"] == 1000
    assert agent.usage_summary() == {"input_tokens": 1000, "output_tokens": 50, "cached_tokens": 0,
                                     "reasoning_tokens": 0, "cost_usd": None}


def test_shipped_prices_are_versioned_and_overridable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert price_table()["openai:gpt-4o-mini"]["input_per_mtok"] == 0.15
    mine = tmp_path / "prices.json"
    mine.write_text(json.dumps({"openai:gpt-4o-mini": {"input_per_mtok": 9.0, "output_per_mtok": 9.0}}))
    monkeypatch.setenv("MEDCOPILOT_PRICES", str(mine))
    settings = AgentSettings(model="gpt-4o-mini")
    assert settings.cost(1_000_000, 0) == pytest.approx(9.0)


def test_a_429_with_retry_after_is_retried_once_and_a_400_is_not(brain_case: Path, tmp_path: Path) -> None:
    waits: list[float] = []
    fake = FakeOpenAI([{"status": 429, "retry_after": 0.25}, {"content": "ANSWER: A"}])
    try:
        agent = ChatAgent(_settings("openai", fake), sleep=waits.append)
        row = run_episode(str(brain_case), agent.name, str(tmp_path / "a"), trace_dir=tmp_path / "a" / "t",
                          policy=agent)  # fmt: skip
    finally:
        fake.stop()
    assert row["status"] == "done" and waits == [0.25] and len(fake.requests) == 2
    fake = FakeOpenAI([{"status": 400, "message": "bad field"}, {"content": "ANSWER: A"}])
    try:
        agent = ChatAgent(_settings("openai", fake), sleep=waits.append)
        row = run_episode(str(brain_case), agent.name, str(tmp_path / "b"), trace_dir=tmp_path / "b" / "t",
                          policy=agent)  # fmt: skip
    finally:
        fake.stop()
    assert row["status"] == "error" and len(fake.requests) == 1 and waits == [0.25]
    assert "HTTP 400" in row["error"]


@pytest.mark.parametrize("provider", list(FAKES))
def test_an_unknown_model_names_the_models_the_server_lists(provider: str, brain_case: Path, tmp_path: Path) -> None:
    fake = FAKES[provider]([{"status": 404, "message": "model not found"}])
    fake.models = ["llava:13b", "qwen2.5vl:7b"]
    try:
        agent = ChatAgent(_settings(provider, fake, model="no-such-model"))
        row = run_episode(str(brain_case), agent.name, str(tmp_path), trace_dir=tmp_path / "t", policy=agent)
    finally:
        fake.stop()
    assert row["status"] == "error" and "does not know the model 'no-such-model'" in row["error"]
    assert "llava:13b, qwen2.5vl:7b" in row["error"] and "--model" in row["error"]


def test_a_rejected_key_names_the_setting(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeAnthropic([{"status": 401}])
    try:
        agent = ChatAgent(_settings("anthropic", fake))
        row = run_episode(str(brain_case), agent.name, str(tmp_path), trace_dir=tmp_path / "t", policy=agent)
    finally:
        fake.stop()
    assert row["status"] == "error" and "ANTHROPIC_API_KEY" in row["error"] and len(fake.requests) == 1


def test_a_context_refusal_names_the_image_budget(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI([{"status": 400, "message": "This model's maximum context length is 8192 tokens"}])
    try:
        agent = ChatAgent(_settings("openai", fake))
        row = run_episode(str(brain_case), agent.name, str(tmp_path), trace_dir=tmp_path / "t", policy=agent)
    finally:
        fake.stop()
    assert row["status"] == "error" and "MEDCOPILOT_KEEP_IMAGES" in row["error"]


@pytest.mark.parametrize("provider", list(FAKES))
def test_stop_ends_a_request_that_never_answers_within_a_second(provider: str, brain_case: Path,
                                                                tmp_path: Path) -> None:  # fmt: skip
    from copilot.cases.pack import load_case
    from copilot.panel.model import PanelModel
    from copilot.runtime import open_session

    fake = FAKES[provider]([{"hang": True}])
    session = open_session(brain_case, trace_dir=tmp_path / "t")
    model = PanelModel(session, load_case(brain_case), 20)
    try:
        agent = ChatAgent(_settings(provider, fake, round_deadline_s=60.0, timeout_s=60.0))
        model.run_episode(agent, "Where is the lesion?")
        deadline = time.monotonic() + 20
        while not fake.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # the request is in flight, unanswered
        t0 = time.perf_counter()
        model.stop()
        assert model.wait(5)
        elapsed = time.perf_counter() - t0
    finally:
        fake.stop()
        session.close({"status": "test"})
    assert elapsed < 1.0 and model.status == "stopped"
    cancelled = [e for e in _events(tmp_path / "t") if e["type"] == "model_cancelled"]
    assert len(cancelled) == 1 and cancelled[0]["round"] == 1


def test_chat_stop_returns_control_within_a_second(tmp_path: Path) -> None:
    """`/stop` typed in `chat` while the model service never answers: the question ends at once."""
    import io
    import queue

    from copilot.panel.model import PanelModel
    from copilot.panel.studies import open_study, study_for
    from copilot.study.chat import Terminal, ask
    from copilot.study.policies import conversation, model_settings
    from tests.workstation_data import nifti_file

    fake = FakeOpenAI([{"hang": True}])
    study = study_for(str(nifti_file(tmp_path)))
    session = open_study(study, tmp_path / "t")
    model = PanelModel(session, study, 20)
    term = Terminal(out=io.StringIO(), err=io.StringIO())
    term.lines = queue.Queue()
    term._reader = threading.current_thread()  # lines come from the test, not stdin
    try:
        settings = model_settings("openai:scripted-model", base_url=fake.base_url, round_deadline_s=60.0)
        policy = conversation(settings, study, study.kind)

        def type_stop() -> None:
            while not fake.requests:
                time.sleep(0.02)
            time.sleep(0.2)
            stamps.append(time.perf_counter())
            term.lines.put("/stop")

        stamps: list[float] = []
        threading.Thread(target=type_stop, daemon=True).start()
        status = ask(model, policy, "Is there a lesion?", term)
        elapsed = time.perf_counter() - stamps[0]
    finally:
        fake.stop()
        session.close({"status": "test"})
    assert status == "stopped" and elapsed < 1.0
    assert any(e["type"] == "model_cancelled" for e in _events(tmp_path / "t"))


# ----- the one policy-spec parser -----
def test_policy_specs_name_provider_model_and_wire(tmp_path: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "a", "GEMINI_API_KEY": "g", "OPENAI_API_KEY": "o"}
    spec = parse_policy("anthropic:claude-sonnet-4-5", env=env)
    assert (spec.provider, spec.model, spec.wire, spec.api_key) == ("anthropic", "claude-sonnet-4-5",
                                                                     "anthropic-messages", "a")  # fmt: skip
    assert parse_policy("gemini", env=env).model == "gemini-3-flash-preview"
    assert parse_policy("openai", env={**env, "MEDCOPILOT_MODEL": "gpt-4.1"}).model == "gpt-4.1"
    assert parse_policy("openai:gpt-4o", model="gpt-5", env=env).model == "gpt-5"
    local = parse_policy("local:http://127.0.0.1:11434/v1", env={})
    assert (local.provider, local.base_url, local.wire, local.model) == ("local", "http://127.0.0.1:11434/v1",
                                                                         "openai-chat", "")  # fmt: skip
    assert "api_key" not in repr(spec) or "'a'" not in repr(spec)
    assert model_of("openai:gpt-4o") == "gpt-4o" and model_of("baseline") == "baseline"
    with pytest.raises(SpecError, match="AZURE_OPENAI_ENDPOINT"):
        parse_policy("azure:prod-4o", env={})
    with pytest.raises(SpecError, match="not a model policy"):
        parse_policy("mystery:x", env={})
    assert service_problem(parse_policy("anthropic:x", env={})) is not None


def test_secrets_in_a_base_url_are_refused_and_redacted() -> None:
    for url in ("http://user:pw@host/v1", "https://host/v1?api_key=sk-123", "https://host/v1?key=AIza"):
        with pytest.raises(SpecError) as err:
            parse_policy("openai", base_url=url, env={})
        assert "pw" not in str(err.value) and "sk-123" not in str(err.value) and "AIza" not in str(err.value)
    assert redact_text("http://user:pw@host:8/v1?key=s&x=1") == "http://[redacted]@host:8/v1?key=[redacted]&x=1"


def test_keys_come_from_the_environment_or_an_owner_only_file(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("sk-file-key\n")
    os.chmod(key, 0o644)
    with pytest.raises(SpecError, match=f"chmod 600 {key}"):
        parse_policy("anthropic:m", env={"ANTHROPIC_API_KEY_FILE": str(key)})
    os.chmod(key, 0o600)
    assert parse_policy("anthropic:m", env={"ANTHROPIC_API_KEY_FILE": str(key)}).api_key == "sk-file-key"


def test_a_local_server_without_a_model_named_takes_the_one_it_lists(brain_case: Path, tmp_path: Path) -> None:
    fake = FakeOpenAI([{"content": "ANSWER: A"}])
    fake.models = ["qwen2.5vl:7b"]
    try:
        agent = ChatAgent(AgentSettings.for_policy(f"local:{fake.base_url}", max_retries=0))
        row = run_episode(str(brain_case), agent.name, str(tmp_path), trace_dir=tmp_path / "t", policy=agent)
    finally:
        fake.stop()
    assert agent.name == "local:qwen2.5vl:7b" and fake.requests[0]["model"] == "qwen2.5vl:7b"
    assert row["status"] == "done"


def test_an_azure_deployment_is_addressed_as_azure_does(brain_case: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    fake = FakeOpenAI([{"content": "ANSWER: A"}])
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", fake.root)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-key")
    try:
        agent = ChatAgent(AgentSettings.for_policy("azure:prod-gpt4o", max_retries=0))
        row = run_episode(str(brain_case), agent.name, str(tmp_path), trace_dir=tmp_path / "t", policy=agent)
    finally:
        fake.stop()
    assert row["status"] == "done"
    assert fake.paths[0].startswith("/openai/deployments/prod-gpt4o/chat/completions?api-version=")
    assert fake.headers[0]["api-key"] == "az-key"


def test_every_provider_is_offered_the_same_tools(episodes: dict) -> None:
    """Tool declarations come from one registry view: the same names, descriptions and schemas on every wire."""
    openai = {t["function"]["name"]: (t["function"]["description"], t["function"]["parameters"])
              for t in episodes["openai"][1].requests[0]["tools"]}  # fmt: skip
    anthropic = {t["name"]: (t["description"], t["input_schema"])
                 for t in episodes["anthropic"][1].requests[0]["tools"]}  # fmt: skip
    gemini = {d["name"]: (d["description"], d.get("parametersJsonSchema") or d.get("parameters_json_schema"))
              for d in episodes["gemini"][1].requests[0]["tools"][0]["functionDeclarations"]}  # fmt: skip
    assert openai == anthropic == gemini and len(openai) > 10


def test_the_episode_page_names_the_model_and_its_cost(episodes: dict) -> None:
    row = episodes["anthropic"][0]
    page = next(Path(row["trace_path"]).parent.rglob("*.html"), None) or next(Path(row["trace_path"]).rglob("*.html"))
    text = page.read_text()
    assert "anthropic · scripted-model · anthropic-messages" in text and "3000 input tokens" in text
    assert "$0.0033" in text


def test_models_command_lists_what_the_server_serves(capsys: pytest.CaptureFixture[str]) -> None:
    from copilot.cli import main

    fake = FakeOpenAI([{"content": "x"}])
    fake.models = ["qwen2.5vl:7b", "llava:13b"]
    try:
        rc = main(["models", "--policy", f"local:{fake.base_url}"])
    finally:
        fake.stop()
    assert rc == 0 and capsys.readouterr().out.split() == ["llava:13b", "qwen2.5vl:7b"]


def test_chat_prints_tokens_and_cost_per_question(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from copilot.cli import main
    from tests.workstation_data import nifti_file

    fake = FakeOpenAI([{"content": "No lesion is seen."}])
    try:
        rc = main(["chat", str(nifti_file(tmp_path)), "--ask", "Anything?", "--base-url", fake.base_url,
                   "--model", "unpriced", "--trace-dir", str(tmp_path / "t")])  # fmt: skip
    finally:
        fake.stop()
    out = capsys.readouterr().out
    assert rc == 0 and "answer: No lesion is seen." in out
    assert "tokens: this question 1000 in (0 cached) / 50 out, no price known; conversation 1000 in" in out


def test_the_host_panel_shows_the_question_tokens_and_cost(brain_case: Path, tmp_path: Path) -> None:
    from copilot.cases.pack import load_case
    from copilot.host.conversation import HostConversation
    from copilot.host.panel import panel_state
    from copilot.runtime import open_session

    fake = FakeOpenAI([{"content": "ANSWER: A"}])
    session = open_session(brain_case, trace_dir=tmp_path / "t")
    try:
        conv = HostConversation(session, load_case(brain_case), lambda: ChatAgent(_settings("openai", fake)), budget=5)
        conv.approve_each = False
        conv.ask("Which diagnosis?")
        assert conv.wait(30)
        status = panel_state(conv).status
    finally:
        fake.stop()
        session.close({"status": "test"})
    assert status == "done · tokens: 1000 in (0 cached) / 50 out, $0.0011"


def test_track_c_runs_natively_on_gemini(brain_case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench trackc` through the seam: the montages go to Gemini as inline images, the reply is scored."""
    from copilot.medflow.runs import read_results
    from copilot.medflow.trackc import run_trackc
    from tests.oracle import perfect_response

    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "brain").symlink_to(brain_case, target_is_directory=True)
    fake = FakeGemini([{"content": perfect_response(brain_case)}])
    monkeypatch.setenv("GEMINI_BASE_URL", fake.base_url)
    monkeypatch.setenv("GEMINI_API_KEY", "g-key")
    try:
        rows, errored = run_trackc(cases, "gemini:vlm-g", tmp_path / "run")
    finally:
        fake.stop()
    assert errored == 0
    assert [(r["track"], r["model"], r["task"], r["strict"]) for r in rows] == [("C", "vlm-g", 1.0, 1.0)]
    request = fake.requests[0]
    assert "tools" not in request and sum("inlineData" in p for p in request["contents"][0]["parts"]) >= 1
    assert read_results(tmp_path / "run" / "results.sqlite")[0]["policy"] == "gemini:vlm-g"
    record = json.loads(next((tmp_path / "run").rglob("request.json")).read_text())
    assert (record["provider"], record["wire"]) == ("gemini", "gemini")
