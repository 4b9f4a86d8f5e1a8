"""Anthropic's Messages API (the `anthropic` SDK), streamed.

Translation from the conversation: system messages → `system`; `image_url` data URLs → `image` blocks with a
base64 source; an assistant's `tool_calls` → `tool_use` blocks (arguments as an object); `tool` messages →
`tool_result` blocks at the head of the next user turn; consecutive turns of one role are merged, as the API
requires alternating roles; tools → `{name, description, input_schema}`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic

from copilot.llm.convert import arguments_object, data_url, parts_of, system_text
from copilot.llm.inflight import InFlight
from copilot.llm.spec import ModelSpec
from copilot.llm.types import ChatRequest, Message, ModelError, Reply, ToolCall, Usage, classify_status

STOP_REASONS = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length", "stop_sequence": "stop"}


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
        self.client = client or anthropic.Anthropic(api_key=spec.api_key or "not-set", base_url=spec.base_url,
                                                    timeout=timeout_s, max_retries=0)  # fmt: skip
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
        usage, finish = Usage(), "stop"
        for event in stream:
            kind = event.type
            if kind == "message_start":
                u = event.message.usage
                cached = int(getattr(u, "cache_read_input_tokens", 0) or 0)
                created = int(getattr(u, "cache_creation_input_tokens", 0) or 0)
                usage = Usage(int(u.input_tokens or 0) + cached + created, int(u.output_tokens or 0), cached)
            elif kind == "content_block_start" and event.content_block.type == "tool_use":
                blocks[event.index] = {"id": event.content_block.id, "name": event.content_block.name, "json": ""}
            elif kind == "content_block_delta" and event.delta.type == "text_delta":
                text.append(event.delta.text)
                if on_text is not None:
                    on_text(event.delta.text)
            elif kind == "content_block_delta" and event.delta.type == "input_json_delta":
                blocks[event.index]["json"] += event.delta.partial_json
            elif kind == "message_delta":
                finish = STOP_REASONS.get(event.delta.stop_reason or "", event.delta.stop_reason or "stop")
                usage.output_tokens = int(getattr(event.usage, "output_tokens", 0) or usage.output_tokens)
        calls = [ToolCall(b["id"], b["name"], b["json"] or json.dumps({})) for _, b in sorted(blocks.items())]
        return Reply("".join(text), calls, finish, usage, len(text))
