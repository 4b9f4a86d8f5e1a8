"""A few tiny requests before a run spends money: does the service call tools, take the images a request will
carry, stream, and hold the context the run needs? With the profile the run will use and an estimate of its tokens
and cost (cases × rounds × measured tokens × price). `medcopilot models check` prints it; `bench run` refuses a
run that would fail at round 2, naming what to change."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from typing import Any

from copilot.llm.calls import ChatModel
from copilot.llm.connect import explain
from copilot.llm.profiles import ModelProfile
from copilot.llm.spec import ModelSpec
from copilot.llm.types import ChatRequest, ModelError, ToolDecl, Usage

ECHO = ToolDecl("echo_check", "Repeat the given word (a connectivity check).",
                {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]})  # fmt: skip
TASK_TOKENS = 2500  # system prompt, task and tool declarations of a MedFlow episode, measured on the brain prompt
ROUND_TOKENS = 400  # a round's calls and results as text


def tiny_png(shade: int) -> str:
    """A 16×16 grey PNG as a data URL (the smallest view a service still counts as an image)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (16, 16), shade).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Preflight:
    """What the checks found; `problems` are the reasons a run would fail (each names what to change)."""

    profile: ModelProfile
    checks: list[Check] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    tokens_per_image: float | None = None

    @property
    def problems(self) -> list[str]:
        return [c.detail for c in self.checks if not c.ok]

    def lines(self) -> list[str]:
        p = self.profile
        out = [f"profile: {p.id} (version {p.version}; tools {p.tools}, at most {p.max_images} images per request, "
               f"context {p.context_tokens or 'unknown'})"]  # fmt: skip
        if self.profile.warning:
            out.append(f"warning: {self.profile.warning}")
        out += [f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}" for c in self.checks]
        return out


def run_checks(spec: ModelSpec, wire: ChatModel, profile: ModelProfile, tool_protocol: str, images: int,
               context_needed: int | None, listed_context: int | None = None,
               reasoning: str | None = None) -> Preflight:  # fmt: skip
    """Tools, `images` images in one request, streaming, and the context a run needs."""
    report = Preflight(profile)
    stream_before = getattr(wire, "stream", True)

    def ask(request: ChatRequest) -> Any:
        try:
            reply = wire.complete(request, None)
        except ModelError as exc:
            if exc.kind != "malformed":
                raise
            reply = wire.complete(request, None)  # once more: a stream answered whole is asked for whole now
        report.usage = report.usage + reply.usage
        return reply

    tools = [ECHO]
    try:
        ask_echo = [{"role": "user", "content": "Call echo_check with the word 'ready'."}]
        reply = ask(ChatRequest(ask_echo, tools, None, 64, reasoning))
        called = any(c.name == ECHO.name for c in reply.tool_calls)
        report.checks.append(Check("tools", True, f"{tool_protocol} tool calls answered"
                                   + ("" if called else " (the model chose not to call; not a failure)")))  # fmt: skip
    except ModelError as exc:
        report.checks.append(Check("tools", False, explain(exc, spec)))
    n = max(1, images)
    parts: list[dict[str, Any]] = [{"type": "text", "text": "How many images are there? Answer with a number."}]
    parts += [{"type": "image_url", "image_url": {"url": tiny_png(40 + 20 * k)}} for k in range(n)]
    try:
        before = report.usage.input_tokens
        ask(ChatRequest([{"role": "user", "content": parts}], [], None, 16, reasoning))
        measured = report.usage.input_tokens - before
        report.tokens_per_image = measured / n if measured else None
        report.checks.append(Check("images", True, f"{n} images in one request accepted"))
    except ModelError as exc:
        report.checks.append(Check("images", False, f"{n} images per request refused: {explain(exc, spec)}"))
    streams = getattr(wire, "stream", True)
    report.checks.append(Check("streaming", True, "streamed replies read" if streams and stream_before else
                               "the service answers a stream with whole replies: runs ask for whole replies "
                               "(MEDCOPILOT_STREAM=0)"))  # fmt: skip
    context = listed_context or profile.context_tokens
    if context_needed is not None and context is not None and context_needed > context:
        report.checks.append(Check("context", False, f"a run needs about {context_needed} tokens per request; the "
                                   f"service takes {context}: raise its context (vLLM --max-model-len, Ollama "
                                   "OLLAMA_CONTEXT_LENGTH, llama.cpp -c) or lower --max-images"))  # fmt: skip
    elif context_needed is not None:
        of = f" of {context}" if context else " (the service's limit is not known)"
        report.checks.append(Check("context", True, f"about {context_needed} tokens per request{of}"))
    return report


def context_needed(images: int, rounds: int, tokens_per_image: float) -> int:
    """The largest request of a run: its task, every round's text, and the images it keeps."""
    return int(TASK_TOKENS + rounds * ROUND_TOKENS + images * tokens_per_image)


def cost_estimate(cases: int, rounds: int, per_request_tokens: int, price: dict[str, float] | None) -> str:
    """Tokens and dollars of a run if every episode spends its whole budget (an upper estimate)."""
    tokens = cases * (rounds + 1) * per_request_tokens
    if not price:
        return f"about {tokens:,} input tokens at most (no price known for this model)"
    dollars = tokens * price.get("input_per_mtok", 0.0) / 1e6
    return f"about {tokens:,} input tokens at most, ${dollars:,.2f} of input at list price"
