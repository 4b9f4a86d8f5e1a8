"""Anthropic's Messages API (the `anthropic` SDK), streamed.

Translation from the conversation: system messages → `system`; `image_url` data URLs → `image` blocks with a
base64 source; an assistant's `tool_calls` → `tool_use` blocks (arguments as an object); `tool` messages →
`tool_result` blocks at the head of the next user turn; consecutive turns of one role are merged, as the API
requires alternating roles; tools → `{name, description, input_schema}`. An assistant turn the service produced goes
back as the content blocks it returned, exactly: with thinking on (`--reasoning adaptive` or a budget of tokens),
its thinking blocks and their signatures precede the tool calls, unmodified, as the Messages API requires.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic

from copilot.llm.convert import arguments_object, data_url, own_items, parts_of, system_text
from copilot.llm.inflight import InFlight
from copilot.llm.profiles import profile_for
from copilot.llm.spec import ModelSpec
from copilot.llm.types import ChatRequest, Message, ModelError, Reply, ToolCall, Usage, classify_status

STOP_REASONS = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length", "stop_sequence": "stop"}
WIRE = "anthropic-messages"


def thinking_param(level: str | None) -> dict[str, Any] | None:
    """The Messages API's `thinking` for a reasoning level: `adaptive`, or a budget of tokens (at least 1024)."""
    if not level:
        return None
    if level == "adaptive":
        return {"type": "adaptive"}
    return {"type": "enabled", "budget_tokens": max(1024, int(level))}


def _error(exc: Exception) -> ModelError:
    if isinstance(exc, anthropic.APIStatusError):
        return classify_status(exc.status_code, str(exc), exc.response.headers)
    return ModelError("retryable", f"{type(exc).__name__}: {exc}")


def _blocks(content: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts_of(content):
        if part.get("type") == "text":
            out.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            mime, data = data_url(part["image_url"]["url"])
            out.append({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
    return out


def to_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The conversation as Messages API turns (system left out: it goes in `system`)."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            role, blocks = "user", [{"type": "tool_result", "tool_use_id": m["tool_call_id"],
                                     "content": str(m.get("content") or "")}]  # fmt: skip
        elif m["role"] == "assistant" and (own := own_items(m, WIRE)) is not None:
            role, blocks = "assistant", own
        elif m["role"] == "assistant":
            role = "assistant"
            blocks = _blocks(m.get("content"))
            blocks += [
                {"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                 "input": arguments_object(c["function"]["arguments"])}
                for c in m.get("tool_calls") or []
            ]  # fmt: skip
        else:
            role, blocks = "user", _blocks(m.get("content"))
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


class AnthropicMessages:
    """Claude models through the Messages API."""

    wire = "anthropic-messages"

    def __init__(self, spec: ModelSpec, timeout_s: float, stream: bool = True, client: Any = None) -> None:
        self.spec = spec
        self.profile = profile_for(spec.provider, spec.model)
        http = anthropic.DefaultHttpxClient(follow_redirects=False, timeout=timeout_s)  # a 3xx is an error
        self.client = client or anthropic.Anthropic(api_key=spec.api_key or "not-set", base_url=spec.base_url,
                                                    timeout=timeout_s, max_retries=0, http_client=http)  # fmt: skip
        self.inflight = InFlight()

    def list_models(self) -> list[str]:
        try:
            return sorted(m.id for m in self.client.models.list())
        except anthropic.AnthropicError as exc:
            raise _error(exc) from exc

    def abort(self) -> None:
        self.inflight.abort()

    def complete(self, request: ChatRequest, on_text: Callable[[str], None] | None = None) -> Reply:
        kwargs: dict[str, Any] = {
            "model": self.spec.model, "max_tokens": request.max_tokens,
            "messages": to_messages(request.messages),
        }  # fmt: skip (no temperature: the Messages API of the anthropic 2.x SDK takes no sampling parameter)
        thinking = thinking_param(request.reasoning)
        if thinking is not None:
            kwargs["thinking"] = thinking
            kwargs["max_tokens"] = request.max_tokens + int(thinking.get("budget_tokens", 0))  # above the budget
        system = system_text(request.messages)
        if system:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                               for t in request.tools]  # fmt: skip
        try:
            stream = self.client.messages.create(**kwargs, stream=True)
            return self.inflight.read(stream, lambda s: self._read(s, on_text))
        except anthropic.AnthropicError as exc:
            raise _error(exc) from exc

    @staticmethod
    def _read(stream: Any, on_text: Callable[[str], None] | None) -> Reply:
        text: list[str] = []
        blocks: dict[int, dict[str, str]] = {}
        raw: dict[int, dict[str, Any]] = {}  # every content block as received, to send back unmodified
        usage, finish, stopped, version = Usage(), "stop", False, None
        for event in stream:
            kind = event.type
            if kind == "message_start":
                u = event.message.usage
                version = getattr(event.message, "model", None)
                cached = int(getattr(u, "cache_read_input_tokens", 0) or 0)
                created = int(getattr(u, "cache_creation_input_tokens", 0) or 0)
                usage = Usage(int(u.input_tokens or 0) + cached + created, int(u.output_tokens or 0), cached)
            elif kind == "content_block_start":
                block = event.content_block
                raw[event.index] = block.model_dump(mode="json", exclude_none=True)
                if block.type == "tool_use":
                    blocks[event.index] = {"id": block.id, "name": block.name, "json": ""}
            elif kind == "content_block_delta":
                AnthropicMessages._delta(event, raw, blocks, text, on_text)
            elif kind == "message_delta":
                finish = STOP_REASONS.get(event.delta.stop_reason or "", event.delta.stop_reason or "stop")
                usage.output_tokens = int(getattr(event.usage, "output_tokens", 0) or usage.output_tokens)
            elif kind == "message_stop":
                stopped = True
        if not stopped:
            raise ModelError("malformed", "the stream ended before the message was complete (no message_stop)")
        calls = [ToolCall(b["id"], b["name"], b["json"] or json.dumps({})) for _, b in sorted(blocks.items())]
        if not (text or calls):
            raise ModelError("malformed", f"the service's message is empty (stop reason {finish})")
        for n, b in blocks.items():
            raw[n]["input"] = arguments_object(b["json"])
        items = [raw[n] for n in sorted(raw)]
        return Reply("".join(text), calls, finish, usage, len(text), {"wire": WIRE, "items": items}, version)

    @staticmethod
    def _delta(event: Any, raw: dict[int, dict[str, Any]], blocks: dict[int, dict[str, str]], text: list[str],
               on_text: Callable[[str], None] | None) -> None:  # fmt: skip
        """One content block delta: text streamed on, call arguments, thinking and its signature accumulated."""
        delta, block = event.delta, raw.get(event.index, {})
        if delta.type == "text_delta":
            text.append(delta.text)
            block["text"] = block.get("text", "") + delta.text
            if on_text is not None:
                on_text(delta.text)
        elif delta.type == "input_json_delta":
            blocks[event.index]["json"] += delta.partial_json
        elif delta.type == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
        elif delta.type == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.signature
