"""`medcopilot models check` and `bench run`'s preflight against provider-faithful fakes (tests/provider_fakes.py);
one rule for where a request goes: `--base-url` honoured on every wire by `bench run`, no redirect followed."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from copilot.cli import main
from tests.fake_openai import FakeAnthropic, FakeGemini, FakeOpenAI
from tests.provider_fakes import FakeVLLM, ThinkingAnthropic


def answers(body: dict[str, Any]) -> dict[str, Any]:
    """A model that calls the echo tool when offered one and otherwise answers briefly."""
    if body.get("tools"):
        return {"tool_calls": [{"name": "echo_check", "arguments": json.dumps({"word": "ready"})}]}
    return {"content": "ANSWER: A"}


def test_models_check_passes_a_well_served_model(capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeVLLM(answers, max_model_len=65536)  # type: ignore[arg-type]
    try:
        rc = main(["models", "check", "--policy", f"local:{fake.base_url}", "--model", "Qwen/Qwen3.5-9B",
                   "--cases", "10"])  # fmt: skip
    finally:
        fake.stop()
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "profile: qwen3.5" in out and "ok   tools" in out and "ok   images: 6 images" in out
    assert "estimate for 10 case(s) × 20 rounds" in out and "no price known" in out


@pytest.mark.parametrize(("fake_kw", "words"), [
    ({"tool_parser": False}, "--enable-auto-tool-choice"),
    ({"image_limit": 2}, "--limit-mm-per-prompt"),
    ({"max_model_len": 8192}, "--max-model-len"),
])  # fmt: skip
def test_models_check_names_what_to_change(fake_kw: dict[str, Any], words: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    fake = FakeVLLM(answers, **fake_kw)  # type: ignore[arg-type]
    try:
        rc = main(["models", "check", "--policy", f"local:{fake.base_url}", "--model", "Qwen/Qwen3.5-9B"])
    finally:
        fake.stop()
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL" in out and words in out, out


def test_models_check_of_a_model_without_native_tools_uses_text(capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeVLLM(answers, model="google/medgemma-27b-it", tool_parser=False)  # type: ignore[arg-type]
    try:
        rc = main(["models", "check", "--policy", f"local:{fake.base_url}", "--model", "google/medgemma-27b-it"])
    finally:
        fake.stop()
    out = capsys.readouterr().out
    assert rc == 0 and "profile: gemma3" in out and "text tool calls answered" in out, out


def test_models_check_of_claude(capsys: pytest.CaptureFixture[str]) -> None:
    fake = ThinkingAnthropic(answers)  # type: ignore[arg-type]
    try:
        rc = main(["models", "check", "--policy", "anthropic:claude-opus-4-7", "--base-url", fake.base_url,
                   "--reasoning", "adaptive"])  # fmt: skip
    finally:
        fake.stop()
    out = capsys.readouterr().out
    assert rc == 0 and "profile: claude-4" in out, out
    assert all(b.get("thinking") == {"type": "adaptive"} for b in fake.requests)


def test_bench_run_refuses_a_misconfigured_server_before_the_first_case(
    brain_case: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeVLLM(answers, tool_parser=False)  # type: ignore[arg-type]
    try:
        rc = main(["bench", "run", "--cases", str(brain_case.parent), "--policy", f"local:{fake.base_url}",
                   "--out", str(tmp_path / "run"), "--workers", "1"])  # fmt: skip
        before = len(fake.requests)
    finally:
        fake.stop()
    err = capsys.readouterr().err
    assert rc == 2 and "would fail" in err and "--enable-auto-tool-choice" in err, err
    assert not (tmp_path / "run" / "results.sqlite").exists() and before == 2  # the two preflight requests only


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai"])
def test_bench_run_sends_every_provider_to_its_base_url(
    provider: str, brain_case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--base-url` is where the requests go, whatever the wire (it used to reach only chat completions)."""
    cls = {"anthropic": FakeAnthropic, "gemini": FakeGemini, "openai": FakeOpenAI}[provider]
    fake = cls([{"content": "ANSWER: A"}])
    monkeypatch.setenv({"anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY", "openai": "OPENAI_API_KEY"}[
        provider], "test-key")  # fmt: skip
    try:
        rc = main(["bench", "run", "--cases", str(brain_case.parent), "--policy", f"{provider}:scripted-model",
                   "--base-url", fake.base_url, "--out", str(tmp_path / "run"), "--workers", "1",
                   "--no-preflight"])  # fmt: skip
    finally:
        fake.stop()
    assert rc == 0 and len(fake.requests) == 1


class Redirector:
    """A server that answers every request with 307 to another origin, which records what reaches it."""

    def __init__(self, target: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def _redirect(self) -> None:
                self.send_response(307)
                self.send_header("Location", target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = _redirect

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_no_wire_follows_a_redirect_to_another_origin(provider: str, brain_case: Path, tmp_path: Path) -> None:
    from copilot.agent.loop import ChatAgent
    from copilot.agent.settings import AgentSettings
    from copilot.medflow.bench_run import run_episode

    elsewhere = FakeOpenAI([{"content": "ANSWER: A"}])
    hop = Redirector(elsewhere.root)
    try:
        base = hop.url + ("/v1" if provider == "openai" else "")
        agent = ChatAgent(AgentSettings(provider=provider, model="scripted-model", base_url=base, api_key="secret-key",
                                        timeout_s=5, round_deadline_s=10, max_retries=0))  # fmt: skip
        row = run_episode(str(brain_case), agent.name, str(tmp_path), trace_dir=tmp_path / "t", policy=agent)
    finally:
        hop.stop()
        elsewhere.stop()
    assert row["status"] == "error" and "redirects are not followed" in row["error"]
    assert elsewhere.requests == [] and elsewhere.headers == []  # no key, no view sent on


FAKES = {"openai": FakeOpenAI, "anthropic": FakeAnthropic, "gemini": FakeGemini}
KEYS = {"anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY", "openai": "OPENAI_API_KEY"}


@pytest.mark.parametrize("provider", list(FAKES))
def test_a_timeout_is_retried_on_every_wire(provider: str, brain_case: Path, tmp_path: Path) -> None:
    from copilot.agent.loop import ChatAgent
    from copilot.agent.settings import AgentSettings
    from copilot.medflow.bench_run import run_episode

    fake = FAKES[provider]([{"stall_s": 1.5, "content": "late"}, {"content": "ANSWER: A"}])
    try:
        agent = ChatAgent(AgentSettings(provider=provider, model="scripted-model", base_url=fake.base_url,
                                        api_key="k", timeout_s=0.5, round_deadline_s=10, max_retries=2,
                                        backoff_base_s=0.01))  # fmt: skip
        row = run_episode(str(brain_case), agent.name, str(tmp_path), trace_dir=tmp_path / "t", policy=agent)
    finally:
        fake.stop()
    events = [json.loads(line) for line in (tmp_path / "t" / "trace.jsonl").read_text().splitlines()]
    retries = [e for e in events if e["type"] == "model_retry"]
    assert row["status"] == "done" and row["response"] == "ANSWER: A"
    assert len(retries) == 1 and retries[0]["kind"] == "retryable"


@pytest.mark.parametrize("provider", list(FAKES))
def test_run_and_trackc_send_every_provider_to_its_base_url(
    provider: str, brain_case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYS[provider], "test-key")
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "brain").symlink_to(brain_case, target_is_directory=True)
    fake = FAKES[provider]([{"content": "ANSWER: A"}])
    try:
        assert main(["run", "--case", str(brain_case), "--policy", f"{provider}:scripted-model", "--base-url",
                     fake.base_url, "--out", str(tmp_path / "trace")]) == 0  # fmt: skip
        assert main(["bench", "trackc", "--cases", str(cases), "--policy", f"{provider}:scripted-model",
                     "--base-url", fake.base_url, "--out", str(tmp_path / "run")]) == 0  # fmt: skip
    finally:
        fake.stop()
    assert len(fake.requests) == 2 and "tools" in json.dumps(fake.requests[0]) and "tools" not in fake.requests[1]


def test_chat_prints_the_models_text_without_its_escape_codes() -> None:
    import io

    from copilot.study.chat import Terminal

    term = Terminal.__new__(Terminal)
    term.out, term._streaming = io.StringIO(), False
    term.stream("safe \x1b[8mhidden\x1b[0m \u202etxet\u202c\rover\x07")
    term.say("plain \x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\")
    printed = term.out.getvalue()
    assert "\x1b" not in printed and "\r" not in printed and "\u202e" not in printed and "\x07" not in printed
    assert printed.startswith("model: safe [8mhidden[0m txet")
