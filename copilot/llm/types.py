"""What a model request and its reply are, whatever the provider: tool declarations, tool calls, usage, errors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]  # chat-completions shape: {"role", "content", "tool_calls"?, "tool_call_id"?}


@dataclass(frozen=True)
class ToolDecl:
    """A tool the model may call: its name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]

    def openai(self) -> dict[str, Any]:
        """The chat-completions declaration (the conversation's own shape)."""
        function = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for; `arguments` is the JSON text exactly as the model produced it."""

    id: str
    name: str
    arguments: str
    problem: str | None = None  # a call the reply spelled wrongly (text protocol): answered as a tool error

    def message_part(self) -> dict[str, Any]:
        """The call as an assistant message's `tool_calls` entry."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Usage:
    """Tokens of one request (input includes cached input; cached is the part served from the provider's cache)."""

    input_tokens: int = 0
    output_tokens: int = 0  # includes reasoning (thinking) tokens, as every provider bills them
    cached_tokens: int = 0
    reasoning_tokens: int = 0  # the part of the output spent reasoning (OpenAI reasoning, Gemini thoughts)

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.cached_tokens + other.cached_tokens,
                     self.reasoning_tokens + other.reasoning_tokens)  # fmt: skip

    def as_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cached_tokens": self.cached_tokens, "reasoning_tokens": self.reasoning_tokens}  # fmt: skip


@dataclass
class ChatRequest:
    """One request: the conversation so far and the tools offered (none: the model must answer in text)."""

    messages: list[Message]
    tools: list[ToolDecl] = field(default_factory=list)
    temperature: float | None = 0.0  # None: the service's default (a wire never sends what its profile refuses)
    max_tokens: int = 4096
    reasoning: str | None = None  # a level of the profile's reasoning control; None: the service's default


@dataclass
class Reply:
    """The model's turn: text (possibly empty), the calls it asks for, why it stopped, and what it cost in tokens."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    chunks: int = 0  # streamed text pieces received (1 for a reply that arrived whole)
    state: dict[str, Any] | None = None  # {"wire", "items"}: the turn exactly as the service sent it, to send back
    model_version: str | None = None  # the snapshot the service says answered

    def assistant_message(self) -> Message:
        """The turn as the conversation keeps it (with the service's own form of it, which its wire sends back)."""
        message: Message = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [c.message_part() for c in self.tool_calls]
        if self.state is not None:
            message[PROVIDER_STATE] = self.state
        return message


PROVIDER_STATE = "provider_state"  # an assistant message's key for the turn in its service's own form


ERROR_KINDS = ("retryable", "auth", "not_found", "context", "bad_request", "cancelled", "deadline", "image_limit",
               "tools_unsupported", "malformed", "redirect")


class ModelError(RuntimeError):
    """A request that failed, classified so callers know whether to retry and what to tell the user.

    kind: retryable (429, 5xx, connection reset, timeout), auth (401/403), not_found (unknown model), context
    (the conversation is too long), image_limit (more images than the server takes per request), tools_unsupported
    (a server that serves no tool calls), malformed (a reply that cannot be read: not a stream, no choices, empty,
    cut short; retried), redirect (never followed), bad_request (other 4xx), cancelled (the clinician stopped it),
    deadline.
    """

    def __init__(self, kind: str, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown model error kind {kind!r}")
        self.kind, self.status, self.retry_after = kind, status, retry_after

    @property
    def retryable(self) -> bool:
        return self.kind in ("retryable", "malformed")


def retry_after_seconds(headers: Any) -> float | None:
    """The Retry-After header's delay in seconds (a number of seconds; HTTP dates are not honoured)."""
    value = headers.get("retry-after") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


CONTEXT_WORDS = ("context length", "context_length", "maximum context", "too many tokens", "prompt is too long",
                 "exceeds the maximum", "context window", "input token count")  # fmt: skip


IMAGE_LIMIT_WORDS = ("image(s) may be provided", "--limit-mm-per-prompt", "too many images", "images per request",
                     "image items in the same prompt", "maximum number of images")  # fmt: skip
TOOLS_UNSUPPORTED_WORDS = ("--enable-auto-tool-choice", "--tool-call-parser", "does not support tools",
                           "tools are not supported", "tool use is not supported")  # fmt: skip
_LIMIT = re.compile(r"(?:at most|limit of|maximum of|set image=|up to)\s*(\d+)\s*image|image=(\d+)|(\d+)\s*image\(s\)",
                    re.IGNORECASE)  # fmt: skip


def image_limit_of(message: str) -> int | None:
    """The number of images per request a refusal names ("At most 4 image(s) may be provided …"), if any."""
    m = _LIMIT.search(message)
    if m is None:
        return None
    return int(next(g for g in m.groups() if g is not None))


def classify_status(status: int, message: str, headers: Any = None) -> ModelError:
    """The error kind of an HTTP status answered by a model service."""
    if 300 <= status < 400:
        where = headers.get("location") if headers is not None else None
        return ModelError("redirect", f"answered {status} towards {where or 'another address'}; redirects are not "
                                      "followed: point --base-url at the final address", status)  # fmt: skip
    if status == 429 or status >= 500:
        return ModelError("retryable", message, status, retry_after_seconds(headers))
    if status in (401, 403):
        return ModelError("auth", message, status)
    if status == 404:
        return ModelError("not_found", message, status)
    lowered = message.lower()
    if status in (400, 413, 422) and any(w in lowered for w in IMAGE_LIMIT_WORDS):
        return ModelError("image_limit", message, status)
    if status in (400, 422, 501) and any(w in lowered for w in TOOLS_UNSUPPORTED_WORDS):
        return ModelError("tools_unsupported", message, status)
    if status in (400, 413, 422) and any(w in lowered for w in CONTEXT_WORDS):
        return ModelError("context", message, status)
    return ModelError("bad_request", message, status)
