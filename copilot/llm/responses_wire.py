"""OpenAI's Responses API (the `openai` SDK), streamed: the wire of GPT-5.x and the o-series.

Translation from the conversation: system messages → `instructions`; user text and `image_url` data URLs →
`input_text` / `input_image` parts; a tool result → a `function_call_output` item answering its `call_id`; an
assistant turn the service produced goes back as the output items it returned, exactly (its reasoning items with
their encrypted content among them, since nothing is stored server-side: `store: false`); any other assistant
turn → an `output_text` message and `function_call` items. No temperature is sent to a model whose profile refuses
one; the output limit is `max_output_tokens`; the reasoning effort comes from the profile or `--reasoning`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai

from copilot.llm.convert import new_call_id, own_items, parts_of, system_text
from copilot.llm.openai_wire import NOT_A_STREAM, OpenAIChat, _error
from copilot.llm.types import ChatRequest, Message, ModelError, Reply, ToolCall, Usage

WIRE = "openai-responses"


def _content(content: Any, detail: str = "auto") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts_of(content):
        if part.get("type") == "text":
            out.append({"type": "input_text", "text": part["text"]})
        elif part.get("type") == "image_url":
            url = part["image_url"]["url"]
            out.append({"type": "input_image", "image_url": url, "detail": part["image_url"].get("detail", detail)})
    return out


def to_input(messages: list[Message]) -> list[dict[str, Any]]:
    """The conversation as Responses input items (system left out: it goes in `instructions`)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "system":
            continue
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"],
                          "output": str(m.get("content") or "")})  # fmt: skip
        elif role == "assistant":
            own = own_items(m, WIRE)
            if own is not None:
                items.extend(own)
                continue
            text = "".join(p["text"] for p in parts_of(m.get("content")) if p.get("type") == "text")
            if text:
                items.append({"role": "assistant", "content": [{"type": "output_text", "text": text}]})
            items += [{"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                       "arguments": c["function"]["arguments"] or "{}"} for c in m.get("tool_calls") or []]  # fmt: skip
        else:
            content = _content(m.get("content"))
            if content:
                items.append({"role": "user", "content": content})
    return items


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    cached = int(getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", 0) or 0)
    reasoning = int(getattr(getattr(usage, "output_tokens_details", None), "reasoning_tokens", 0) or 0)
    return Usage(int(usage.input_tokens or 0), int(usage.output_tokens or 0), cached, reasoning)


def reply_of(response: Any, chunks: int) -> Reply:
    """A finished response as the conversation's turn: its text, calls, usage and its output items to send back."""
    output = list(getattr(response, "output", None) or [])
    text: list[str] = []
    calls: list[ToolCall] = []
    for item in output:
        if item.type == "message":
            text += [c.text for c in item.content or [] if getattr(c, "type", "") == "output_text"]
        elif item.type == "function_call":
            calls.append(ToolCall(item.call_id or new_call_id(), item.name, item.arguments or ""))
    if not (text or calls):
        raise ModelError("malformed", f"the service's response holds no text and no call (status {response.status})")
    incomplete = getattr(response, "status", "") == "incomplete"
    finish = "tool_calls" if calls else ("length" if incomplete else "stop")
    items = [item.model_dump(mode="json", exclude_none=True) for item in output]
    return Reply("".join(text), calls, finish, _usage(response.usage), max(chunks, 1 if text else 0),
                 {"wire": WIRE, "items": items}, getattr(response, "model", None))  # fmt: skip


class OpenAIResponses(OpenAIChat):
    """GPT-5.x and o-series models through the Responses API, reasoning carried across tool calls (the client,
    model listing and Stop are the chat-completions wire's)."""

    wire = WIRE

    def kwargs(self, request: ChatRequest) -> dict[str, Any]:
        """The request's parameters (what is recorded as sent, too)."""
        out: dict[str, Any] = {"model": self.spec.model, "input": to_input(request.messages), "store": False,
                               "include": ["reasoning.encrypted_content"],
                               "max_output_tokens": request.max_tokens}  # fmt: skip
        system = system_text(request.messages)
        if system:
            out["instructions"] = system
        if self.profile.temperature and request.temperature is not None:
            out["temperature"] = request.temperature
        if request.reasoning:
            out["reasoning"] = {"effort": request.reasoning}
        if request.tools:
            out["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                             "parameters": t.parameters, "strict": False} for t in request.tools]  # fmt: skip
        return out

    def complete(self, request: ChatRequest, on_text: Callable[[str], None] | None = None) -> Reply:
        kwargs = self.kwargs(request)
        try:
            if not self.stream:
                return reply_of(self.client.responses.create(**kwargs), 0)
            stream = self.client.responses.create(**kwargs, stream=True)
            return self.inflight.read(stream, lambda s: self._streamed(s, on_text))
        except openai.OpenAIError as exc:
            raise _error(exc) from exc

    def _streamed(self, stream: Any, on_text: Callable[[str], None] | None) -> Reply:
        events, chunks = 0, 0
        for event in stream:
            events += 1
            kind = getattr(event, "type", "")
            if kind == "response.output_text.delta":
                chunks += 1
                if on_text is not None:
                    on_text(event.delta)
            elif kind in ("response.completed", "response.incomplete"):
                return reply_of(event.response, chunks)
            elif kind == "response.failed":
                error = getattr(event.response, "error", None)
                raise ModelError("retryable", f"the response failed: {getattr(error, 'message', error)}")
            elif kind == "error":
                raise ModelError("bad_request", f"{getattr(event, 'code', '')} {getattr(event, 'message', event)}")
        if not events:
            self.stream = False
            raise ModelError("malformed", NOT_A_STREAM)
        raise ModelError("malformed", "the stream ended before the response was complete (no response.completed)")
