"""A tool protocol in text, for models without native tool calling (MedGemma, Gemma 3, a server without a parser).

The tool declarations go into the system prompt; the model writes each call as

    <tool_call>
    {"name": "TOOL", "arguments": {...}}
    </tool_call>

and results come back as `<tool_result id="…" name="…">…</tool_result>` in the next user turn. Calls are read
from the reply strictly: a block that is not a JSON object with a string `name` and an object `arguments`, or a block
left open, becomes a call with a `problem`, which the agent answers as a tool error. The same handlers and traces
serve both protocols; only the messages differ.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from copilot.llm.convert import new_call_id, parts_of, tool_names, without_state
from copilot.llm.types import ChatRequest, Message, Reply, ToolCall, ToolDecl

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|\Z)", re.DOTALL)

INSTRUCTIONS = """## Tools
You act on the viewer only through the tools below. To call a tool, write one block per call, exactly in this form,
with the arguments as a JSON object that follows the tool's schema:
<tool_call>
{{"name": "TOOL_NAME", "arguments": {{"ARGUMENT": "VALUE"}}}}
</tool_call>
Write nothing after your last block. The results come back in the next message, each inside a <tool_result> block.
When you give your final answer, write no <tool_call> block at all.

Available tools (name: description; arguments as JSON schema):
{tools}"""


def declarations(tools: list[ToolDecl]) -> str:
    """The tools as the system prompt lists them."""
    lines = []
    for t in tools:
        description = " ".join(t.description.split())
        lines.append(f"- {t.name}: {description}\n  arguments: {json.dumps(t.parameters, sort_keys=True)}")
    return INSTRUCTIONS.format(tools="\n".join(lines))


def render_call(call: dict[str, Any]) -> str:
    """An assistant's call as the model wrote it (for the history it sees)."""
    try:
        arguments = json.loads(call["function"]["arguments"] or "{}")
    except json.JSONDecodeError:
        arguments = {}
    return f"{OPEN}\n{json.dumps({'name': call['function']['name'], 'arguments': arguments})}\n{CLOSE}"


def to_text_messages(messages: list[Message], tools: list[ToolDecl]) -> list[Message]:
    """The conversation with tools in text: declarations in the system prompt, calls and results as text, turns of
    one role merged (chat templates such as Gemma's require alternating roles)."""
    names = tool_names(messages)
    out: list[Message] = []

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(parts)
        else:
            out.append({"role": role, "content": list(parts)})

    system = "\n\n".join(p["text"] for m in messages if m["role"] == "system" for p in parts_of(m.get("content"))
                         if p.get("type") == "text")  # fmt: skip
    if tools:
        system = f"{system}\n\n{declarations(tools)}" if system else declarations(tools)
    if system:
        out.append({"role": "system", "content": system})
    for m in without_state(messages):
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            call_id = m["tool_call_id"]
            head = f'<tool_result id="{call_id}" name="{names.get(call_id, "")}">'
            body = f"{head}\n{m.get('content') or ''}\n</tool_result>"
            add("user", [{"type": "text", "text": body}])
        elif m["role"] == "assistant":
            text = "".join(p["text"] for p in parts_of(m.get("content")) if p.get("type") == "text")
            blocks = [render_call(c) for c in m.get("tool_calls") or []]
            joined = "\n".join(x for x in [text, *blocks] if x)
            add("assistant", [{"type": "text", "text": joined}] if joined else [])
        else:
            add("user", parts_of(m.get("content")))
    return [{**m, "content": _flatten(m["content"])} for m in out]


def _flatten(content: Any) -> Any:
    """A content of text parts only as one string (what text-only templates read); parts with images as they are."""
    if isinstance(content, list) and all(p.get("type") == "text" for p in content):
        return "\n\n".join(p["text"] for p in content)
    return content


def parse_calls(text: str) -> tuple[str, list[ToolCall]]:
    """The prose before the first call and the calls of a reply; malformed blocks become calls with a `problem`."""
    prose = text.split(OPEN, 1)[0].strip()
    calls: list[ToolCall] = []
    for match in _BLOCK.finditer(text):
        body, closed = match.group(1).strip(), bool(match.group(2))
        calls.append(_call(body, closed))
    return prose, calls


def _call(body: str, closed: bool) -> ToolCall:
    if not closed:
        return ToolCall(new_call_id(), "", body, problem=f"a {OPEN} block was not closed with {CLOSE}")
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return ToolCall(new_call_id(), "", body, problem=f"the block is not JSON: {exc}")
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return ToolCall(new_call_id(), "", body, problem='the block needs a string "name"')
    arguments = value.get("arguments", {})
    if not isinstance(arguments, dict):
        return ToolCall(new_call_id(), value["name"], body, problem='"arguments" must be a JSON object')
    return ToolCall(new_call_id(), value["name"], json.dumps(arguments))


class TextTools:
    """Any wire with the tools carried in text (its own requests sent with no native tool declarations)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.wire = f"{inner.wire}+text-tools"

    def __getattr__(self, name: str) -> Any:  # spec, profile, stream, base_url… of the wire it wraps
        return getattr(self.inner, name)

    def list_models(self) -> list[str]:
        return list(self.inner.list_models())

    def abort(self) -> None:
        self.inner.abort()

    def complete(self, request: ChatRequest, on_text: Callable[[str], None] | None = None) -> Reply:
        text_request = replace(request, messages=to_text_messages(request.messages, request.tools), tools=[])
        reply: Reply = self.inner.complete(text_request, None)  # the raw reply holds call blocks: not streamed on
        prose, calls = parse_calls(reply.text) if request.tools else (reply.text, [])
        if on_text is not None and prose:
            on_text(prose)
        finish = "tool_calls" if calls else reply.finish_reason
        return Reply(prose if calls else reply.text, calls, finish, reply.usage, reply.chunks, None,
                     reply.model_version)  # fmt: skip
