"""Screening each line that reaches the MCP server over stdio, so that every request with an id gets an answer.

The `mcp` transport drops a line it cannot validate (the client waits forever for its reply). Here each line
is checked first, within the JSON limits the HTTP server uses (`copilot.server.limits`): one that is not
JSON (syntax, encoding, a lone surrogate, an integer of more than 40 digits, nesting deeper than 64) is
answered -32700 *Parse error*; one that is JSON but not a JSON-RPC 2.0 message (a batch, a bad `jsonrpc`,
an id that is neither a string nor an integer, a method that is not a string) -32600 *Invalid Request*;
a request whose `params` is not an object -32602 *Invalid params*. The reply carries the request's id
whenever it can be recovered (from the parsed message, else from the raw text), `null` otherwise, as
JSON-RPC 2.0 requires; an invalid notification (no id) is dropped without a reply. Only lines that pass
are handed to the `mcp` session.
"""

from __future__ import annotations

import json
import re
from typing import Any

from copilot.errors import HandlerError
from copilot.server.limits import DEFAULT_LIMITS, Limits, parse_json_body

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
MAX_LINE_BYTES = 16 << 20  # one message; longer lines are refused (-32700) without being parsed
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,40}(?![\d.eE])|"(?:[^"\\]|\\.){0,256}")')


def reply(message_id: Any, code: int, message: str) -> str:
    """A JSON-RPC 2.0 error response line (ASCII only, so it can always be written)."""
    return json.dumps({"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": message}})


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and _encodable(value))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def recover_id(raw: bytes) -> Any:
    """The id of a message that could not be parsed, when its text still shows one (else None)."""
    m = _ID.search(raw[: 1 << 20])
    if m is None:
        return None
    try:
        value = json.loads(m.group(1).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if _valid_id(value) else None


def _lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return not _encodable(value)
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


def screen(raw: bytes, limits: Limits = DEFAULT_LIMITS) -> tuple[str | None, str | None]:
    """(the line to hand to the MCP session, or None; the error reply to write, or None)."""
    line = raw.strip()
    if not line:
        return None, None
    if len(line) > MAX_LINE_BYTES:
        return None, reply(recover_id(line), PARSE_ERROR, f"Parse error: a message over {MAX_LINE_BYTES} bytes")
    try:
        message = parse_json_body(line, replace_limits(limits, len(line)))
    except HandlerError as exc:
        return None, reply(
            recover_id(line), PARSE_ERROR, f"Parse error: {exc.message.replace('request body', 'message')}"
        )
    if _lone_surrogate(message):
        mid = message.get("id") if isinstance(message, dict) and _valid_id(message.get("id")) else recover_id(line)
        return None, reply(mid, PARSE_ERROR, "Parse error: a string holds a lone surrogate (not Unicode text)")
    if not isinstance(message, dict):
        what = "a batch (JSON array)" if isinstance(message, list) else f"a JSON {type(message).__name__}"
        return None, reply(None, INVALID_REQUEST, f"Invalid Request: {what}, not a JSON-RPC message object")
    has_id = "id" in message
    mid = message.get("id")
    if has_id and not _valid_id(mid):
        return None, reply(None, INVALID_REQUEST, "Invalid Request: the id must be a string or an integer")
    if message.get("jsonrpc") != "2.0":
        return None, reply(mid, INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"') if has_id else None
    if "method" in message:
        if not isinstance(message["method"], str):
            return None, reply(mid, INVALID_REQUEST, "Invalid Request: the method must be a string") if has_id else None
        if "params" in message and not isinstance(message["params"], dict):
            what = type(message["params"]).__name__
            return None, reply(
                mid, INVALID_PARAMS, f"Invalid params: params must be an object, not {what}"
            ) if has_id else None
    elif not has_id or not ("result" in message or "error" in message):
        return None, reply(mid, INVALID_REQUEST, "Invalid Request: no method") if has_id else None
    return line.decode("utf-8"), None


def replace_limits(limits: Limits, size: int) -> Limits:
    """The JSON limits for one line (its own size allowed as the body size)."""
    from dataclasses import replace

    return replace(limits, max_body=max(limits.max_body, size))
