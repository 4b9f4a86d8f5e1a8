"""`medcopilot mcp --case CASE_DIR`: the handler registry as an MCP server over stdio (the `mcp` package).

Tools have the handlers' names, descriptions and JSON schemas; a call goes through the same
`Session.call` (validation, rollback, audit trace) and returns the JSON envelope as text content
plus each rendered view as MCP image content. A refused call is an MCP tool error (`is_error`).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server

import copilot
from copilot.session import Session


def build_server(session: Session) -> Server:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        tools = [
            types.Tool(name=s.name, description=s.description, input_schema=s.parameters_schema())
            for s in session.registry.specs(session.track)
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        outcome = await anyio.to_thread.run_sync(lambda: session.call(params.name, args, actor="mcp"))
        envelope = outcome.envelope(with_images=False)
        content: list[Any] = [types.TextContent(type="text", text=json.dumps(envelope))]
        for im in outcome.images:
            content.append(
                types.ImageContent(type="image", data=base64.b64encode(im.data).decode("ascii"), mime_type=im.mime)
            )
        return types.CallToolResult(content=content, is_error=not outcome.ok)

    return Server(
        "medcopilot",
        version=copilot.__version__,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        instructions="Named, audited viewer handlers; no code execution.",
    )


async def serve_stdio(session: Session) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(session)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
