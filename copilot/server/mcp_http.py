"""`medcopilot mcp --http`: the MCP server over streamable HTTP (`/mcp`), behind the checks `serve` makes.

The `mcp` package's session manager speaks the transport (POST for messages, GET for the server's stream, DELETE to
end a session); before it sees a request, the request passes `serve`'s checks in `serve`'s order: declared size
(413), `Host` and `Origin` allow-list (403: a page that rebinds its name to 127.0.0.1 is refused), the bearer token
(401, with `WWW-Authenticate: Bearer`), then the body, read within the size and time limits and screened as one
JSON-RPC message (`mcp_guard`: a malformed one is answered 400 with its JSON-RPC error and id). The connection cap,
the request-header deadline and the fairness rules are the same uvicorn protocol as `serve`'s (`protocol.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import Response

from copilot.errors import HandlerError
from copilot.server.fairness import token_matches
from copilot.server.http import BoundServer
from copilot.server.limits import DEFAULT_LIMITS, Limits, check_host, check_origin, content_length
from copilot.server.mcp_content import MAX_RESULT_CHARS
from copilot.server.mcp_guard import screen
from copilot.server.mcp_server import build_server
from copilot.server.protocol import error_body
from copilot.session import Session
from copilot.trace.redact import register_secret

PATH = "/mcp"
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]


def _refusal(exc: HandlerError, close: bool) -> Response:
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
    if exc.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="medcopilot"'
    if close:  # the body was left unread
        headers["Connection"] = "close"
    return Response(error_body(exc.code, exc.message), exc.status, headers=headers, media_type="application/json")


async def _read_body(receive: Receive, limits: Limits) -> bytes:
    """The whole request body within `limits` (413 past its size, 408 past its time), as `serve` reads it."""
    chunks: list[bytes] = []
    size = 0

    async def read() -> None:
        nonlocal size
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise HandlerError("invalid_request", "the client went away", status=400)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limits.max_body:
                raise HandlerError("too_large", f"request body over {limits.max_body} bytes", status=413)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return

    try:
        await asyncio.wait_for(read(), limits.body_timeout_s)
    except TimeoutError:
        raise HandlerError("request_timeout", f"body not received within {limits.body_timeout_s:g} s", 408) from None
    return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body already read, then whatever the connection sends next (its disconnect)."""
    sent = False

    async def again() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


class McpApp:
    """The ASGI application: `serve`'s checks, then the `mcp` session manager."""

    def __init__(self, server: McpHttpServer) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers, limits = Headers(scope=scope), self.server.limits
        has_body = "chunked" in headers.get("transfer-encoding", "").lower()
        try:
            has_body = bool(content_length(headers.get("content-length"), limits)) or has_body
            check_host(headers.get("host"), limits)
            check_origin(headers.get("origin"), limits)
            if not token_matches(headers.get("authorization"), self.server.token):
                raise HandlerError("unauthorized", "missing or wrong bearer token", status=401)
            if scope["path"].rstrip("/") != PATH:
                raise HandlerError("not_found", f"no route {scope['method']} {scope['path']} (MCP is at {PATH})", 404)
            if scope["method"] == "POST":
                body = await _read_body(receive, limits)
                _, error = screen(body, limits)
                if error is not None:
                    reply = Response(error, 400, media_type="application/json")
                    await reply(scope, receive, send)
                    return
                receive = _replaying(body, receive)
        except HandlerError as exc:
            await _refusal(exc, close=has_body)(scope, receive, send)
            return
        await self.server.manager.handle_request(scope, receive, send)


class McpHttpServer(BoundServer):
    """uvicorn serving one session's MCP server (`mcp --http`)."""

    path = PATH
    graceful_s = 2  # a client's open GET stream is not waited for longer

    def __init__(
        self,
        session: Session,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str = "",
        limits: Limits = DEFAULT_LIMITS,
        max_result_chars: int = MAX_RESULT_CHARS,
    ) -> None:
        if not token:
            raise ValueError("a bearer token is required")
        self._limits(host, limits)
        self.session, self.token = session, token
        register_secret(token)  # cut out of every trace event, wherever a client puts it
        self.manager = StreamableHTTPSessionManager(
            build_server(session, max_result_chars),
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),  # checked above
            max_request_body_size=limits.max_body,
            max_sessions=limits.max_connections,
        )
        self._listen(McpApp(self), host, port)

    async def _serve(self) -> None:
        async with self.manager.run():
            await self._uvicorn.serve(sockets=[self.socket])

    def _run(self) -> None:
        asyncio.run(self._serve())
