"""Pieces of the conversation every non-chat-completions wire needs: data-URL images, JSON arguments, tool names."""

from __future__ import annotations

import json
import uuid
from typing import Any

from copilot.llm.types import PROVIDER_STATE, Message


def data_url(url: str) -> tuple[str, str]:
    """(mime type, base64 text) of a `data:MIME;base64,…` image URL; ValueError for any other URL (nothing is
    fetched)."""
    head, sep, payload = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise ValueError("only inline base64 images are sent to a model")
    return head[5:-7] or "image/png", payload


def arguments_object(text: str) -> dict[str, Any]:
    """A call's JSON arguments as the object native APIs want; text that is not a JSON object becomes {}."""
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def parts_of(content: Any) -> list[dict[str, Any]]:
    """A message's content as a list of chat-completions parts (a plain string is one text part)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def new_call_id() -> str:
    """An id for a call its service sent without one (unique, so results never answer the wrong call)."""
    return f"call_{uuid.uuid4().hex[:16]}"


def tool_names(messages: list[Message]) -> dict[str, str]:
    """Tool-call id → tool name, from the assistant messages (a tool result names only the id)."""
    return {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}


def system_text(messages: list[Message]) -> str:
    """The system messages' text, joined."""
    return "\n\n".join(p["text"] for m in messages if m["role"] == "system" for p in parts_of(m["content"])
                       if p.get("type") == "text")  # fmt: skip


def own_items(message: Message, wire: str) -> list[Any] | None:
    """The turn exactly as this wire's service sent it (kept on the assistant message), or None (another wire's,
    or a turn that never came from a service: a scripted or restored one)."""
    state = message.get(PROVIDER_STATE)
    if isinstance(state, dict) and state.get("wire") == wire and isinstance(state.get("items"), list):
        return list(state["items"])
    return None


def without_state(messages: list[Message]) -> list[Message]:
    """The messages without the services' own forms of the turns (chat completions takes only its own keys)."""
    return [{k: v for k, v in m.items() if k != PROVIDER_STATE} if PROVIDER_STATE in m else m for m in messages]
