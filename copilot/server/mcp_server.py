"""`medcopilot mcp --case CASE_DIR`: the handler registry as an MCP server over stdio (the `mcp` package).

Tools have the handlers' names, titles, descriptions, JSON schemas and annotations (`mcp_content`); a call goes
through the same `Session.call` (validation, rollback, audit trace) and returns the JSON envelope as text content
plus each rendered view as MCP image content, within the clients' size limits. A refused call is an MCP tool error
(`is_error`). Every line from the client is screened first (`mcp_guard`): a malformed request is answered with its
JSON-RPC error and id instead of being dropped, and log records reach stderr as single lines, never tracebacks.
The same server over streamable HTTP, behind `serve`'s checks, is `mcp_http`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp.types as types
import mcp_types
from mcp.server.lowlevel import Server

import copilot
from copilot import oneline
from copilot.server.mcp_content import MAX_RESULT_CHARS, content, tool
from copilot.server.mcp_guard import INVALID_REQUEST, MAX_LINE_BYTES, reply, screen
from copilot.session import Session


def build_server(session: Session, max_result_chars: int = MAX_RESULT_CHARS) -> Server:
    """The MCP server of one session: its track's handlers as tools, each call audited by the session."""

    tools: list[types.Tool] = []  # made at the first listing: the session's handlers never change

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        if not tools:
            tools.extend(tool(s) for s in session.registry.specs(session.track))
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        outcome = await anyio.to_thread.run_sync(lambda: session.call(params.name, args, actor="mcp"))
        return types.CallToolResult(content=content(outcome, max_result_chars), is_error=not outcome.ok)

    return Server(
        "medcopilot",
        version=copilot.__version__,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        instructions="Named, audited viewer handlers; no code execution.",
    )


class _Wire:
    """The protocol's stdout: a private duplicate of fd 1, written a whole line at a time under a lock."""

    def __init__(self, fd: int) -> None:
        self._fh = os.fdopen(fd, "wb", buffering=0)
        self._lock = anyio.Lock()
        self._pending = ""

    async def write(self, text: str) -> None:
        self._pending += text

    async def flush(self) -> None:
        data, self._pending = self._pending, ""
        async with self._lock:
            await anyio.to_thread.run_sync(self._fh.write, data.encode("utf-8", "backslashreplace"))

    async def send_line(self, line: str) -> None:
        async with self._lock:
            await anyio.to_thread.run_sync(self._fh.write, (line + "\n").encode("utf-8", "backslashreplace"))


class _ScreenedLines:
    """stdin as the `mcp` transport reads it: only lines that pass `mcp_guard.screen`; the others are answered
    on the wire at once with their JSON-RPC error."""

    def __init__(self, source: Any, wire: _Wire) -> None:
        self.source, self.wire = source, wire

    def __aiter__(self) -> _ScreenedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            raw = await anyio.to_thread.run_sync(self.source.readline, MAX_LINE_BYTES + 1)
            if not raw:
                raise StopAsyncIteration
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):  # the rest of an over-long line is skipped
                while (more := await anyio.to_thread.run_sync(self.source.readline, 1 << 20)) and not more.endswith(
                    b"\n"
                ):
                    pass
            line, error = screen(raw)
            if line is not None:
                try:
                    mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception:  # valid JSON-RPC framing that MCP's own schema refuses: answered, never dropped
                    message = json.loads(line)
                    mid = message.get("id")
                    error = (
                        reply(mid, INVALID_REQUEST, "Invalid Request: not an MCP message") if "id" in message else None
                    )
                    line = None
            if error is not None:
                await self.wire.send_line(error)
            if line is not None:
                return line


async def serve_stdio(session: Session) -> None:
    """Serve over stdin/stdout: stray prints of libraries go to stderr (fd 1 is pointed there), the protocol
    writes to a private duplicate of the original stdout."""
    from mcp.server.stdio import stdio_server

    oneline.install()
    sys.stdout.flush()
    wire = _Wire(os.dup(1))
    os.dup2(2, 1)
    server = build_server(session)
    lines = _ScreenedLines(sys.stdin.buffer, wire)
    async with stdio_server(stdin=lines, stdout=wire) as (read_stream, write_stream):  # type: ignore[arg-type]
        await server.run(read_stream, write_stream, server.create_initialization_options())
