"""The image and context budget of a request: how many images stay in the conversation as sent (the newest kept,
the oldest dropped first, each replaced by a one-line note) and an estimate of its tokens against the context.

The budget comes from the model profile (images per request, context length), a setting, or a server's refusal;
the conversation the agent keeps is never changed, only what one request carries.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from copilot.llm.convert import parts_of
from copilot.llm.types import Message

CHARS_PER_TOKEN = 4  # a rough count for text, enough to stay clear of a context limit with a margin


@dataclass(frozen=True)
class ImageBudget:
    """At most `max_images` images per request; with a context, images dropped until the estimate fits."""

    max_images: int | None = None
    context_tokens: int | None = None
    tokens_per_image: int = 1000
    reserve_tokens: int = 4096  # the reply's room

    def record(self) -> dict[str, Any]:
        return {"max_images": self.max_images, "context_tokens": self.context_tokens}


@dataclass(frozen=True)
class Fitted:
    """A request's messages within the budget, and what was left out."""

    messages: list[Message]
    images_sent: int
    images_dropped: int
    estimated_tokens: int


def _is_image(part: dict[str, Any]) -> bool:
    return part.get("type") == "image_url"


def text_tokens(messages: list[Message]) -> int:
    """Tokens of the conversation's text (tool calls and results included), estimated from its length."""
    chars = 0
    for m in messages:
        chars += sum(len(p.get("text", "")) for p in parts_of(m.get("content")) if not _is_image(p))
        chars += sum(len(c["function"]["arguments"] or "") + len(c["function"]["name"]) for c in m.get("tool_calls")
                     or [])  # fmt: skip
    return chars // CHARS_PER_TOKEN


def count_images(messages: list[Message]) -> int:
    return sum(1 for m in messages if isinstance(m.get("content"), list) for p in m["content"] if _is_image(p))


def fit(messages: list[Message], budget: ImageBudget) -> Fitted:
    """The messages with at most as many images as the budget allows, newest first kept."""
    total = count_images(messages)
    keep = total if budget.max_images is None else min(total, max(0, budget.max_images))
    text = text_tokens(messages)
    if budget.context_tokens is not None:
        room = budget.context_tokens - budget.reserve_tokens - text
        keep = max(0, min(keep, room // max(1, budget.tokens_per_image)))
    if keep >= total:
        return Fitted(messages, total, 0, text + total * budget.tokens_per_image)
    out = copy.copy(messages)
    seen = 0
    for n in range(len(out) - 1, -1, -1):  # newest first
        content = out[n].get("content")
        if not isinstance(content, list) or not any(_is_image(p) for p in content):
            continue
        kept_parts, dropped = [], 0
        for part in reversed(content):
            if _is_image(part):
                if seen < keep:
                    seen += 1
                    kept_parts.append(part)
                else:
                    dropped += 1
            else:
                kept_parts.append(part)
        if dropped:
            kept_parts.reverse()
            note = f"[{dropped} earlier image(s) omitted to stay within the model's image and context budget]"
            kept_parts.append({"type": "text", "text": note})
            out[n] = {**out[n], "content": kept_parts}
    return Fitted(out, keep, total - keep, text + keep * budget.tokens_per_image)
