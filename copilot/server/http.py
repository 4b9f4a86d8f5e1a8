"""The handler HTTP server (`medcopilot serve`): `/medcopilot/v1` plus a read-only `/slicer` subset.

An ASGI application (Starlette responses) served by uvicorn (h11): HTTP parsing, keep-alive and idle
timeouts are the server's; `protocol.py` adds a deadline on request headers (408) and answers
unparsable requests (400) and the connection cap (503) with the JSON envelopes used everywhere else.
Every handler call runs in a worker thread through `Session.call`, which serialises calls under the
session lock. Each request is checked in a fixed order before any byte of its body is read: declared
size (413), `Host`/`Origin` allow-list (403, which refuses DNS rebinding even on the open `/slicer`
subset), bearer token (401); then the body is read within the size and time limits and parsed by the
shared JSON limits (400 `invalid_json`). Bound to 127.0.0.1 unless told otherwise; the `/slicer`
subset needs no token only when `slicer_compat` is on and the client is on loopback. `/slicer/exec` is
always refused.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.responses import Response

from copilot.errors import HandlerError, MethodNotAllowed
from copilot.jobs import JobManager
from copilot.kinds import viewer_kind
from copilot.server.body import json_body
from copilot.server.dispatch import dispatch
from copilot.server.fairness import token_matches
from copilot.server.limits import DEFAULT_LIMITS, Limits, check_host, check_origin, content_length
from copilot.server.protocol import error_body as _error_body
from copilot.server.protocol import protocol_for
from copilot.server.routes import API
from copilot.server.slicer_compat import SlicerCompat
from copilot.session import Session
from copilot.trace.redact import register_secret

MAX_BODY = DEFAULT_LIMITS.max_body
Scope = dict[str, Any]


def _body(obj: Any) -> bytes:
    return json_body(obj)


class _Refusal(Exception):
    """A request refused before routing (status, code, message; close: the body was left unread)."""

    def __init__(self, error: HandlerError, close: bool = False) -> None:
        super().__init__(error.message)
        self.error, self.close = error, close


class HandlerApp:
    """The ASGI application of one server: checks, then routes to the session."""

    def __init__(self, server: HandlerServer) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not served
            return
        headers = Headers(scope=scope)
        try:
            response = await self._handle(scope, headers, receive)
        except _Refusal as r:
            extra = {"Connection": "close"} if r.close else {}
            response = self._response(r.error.status, _error_body(r.error.code, r.error.message), extra=extra)
        except HandlerError as exc:
            allow = {"Allow": ", ".join(exc.allow)} if isinstance(exc, MethodNotAllowed) else None
            response = self._response(exc.status, _error_body(exc.code, exc.message), extra=allow)
        except Exception as exc:  # never a dropped connection: a JSON 500 naming the failure
            response = self._response(500, _error_body("internal_error", f"{type(exc).__name__}: {exc}"))
        await response(scope, receive, send)

    @staticmethod
    def _response(status: int, body: bytes, ctype: str = "application/json", extra: dict[str, str] | None = None):
        headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", **(extra or {})}
        return Response(body, status_code=status, media_type=ctype, headers=headers)

    def _authorised(self, headers: Headers) -> bool:
        return token_matches(headers.get("authorization"), self.server.token)

    @staticmethod
    def _loopback(scope: Scope) -> bool:
        client = scope.get("client")
        try:
            return client is not None and ipaddress.ip_address(client[0]).is_loopback
        except ValueError:
            return False

    async def _read_body(self, receive: Any) -> bytes:
        limits = self.server.limits
        chunks: list[bytes] = []
        size = 0

        async def read() -> None:
            nonlocal size
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _Refusal(HandlerError("invalid_request", "the client went away", status=400), close=True)
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limits.max_body:
                    raise _Refusal(HandlerError("too_large", f"request body over {limits.max_body} bytes", 413), True)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return

        try:
            await asyncio.wait_for(read(), limits.body_timeout_s)
        except TimeoutError:
            raise _Refusal(
                HandlerError("request_timeout", f"body not received within {limits.body_timeout_s:g} s", 408), True
            ) from None
        return b"".join(chunks)

    async def _handle(self, scope: Scope, headers: Headers, receive: Any) -> Response:
        limits = self.server.limits
        method, path = scope["method"], scope["path"]
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        try:  # 1. declared size, before anything is read
            declared = content_length(headers.get("content-length"), limits)
        except HandlerError as exc:
            raise _Refusal(exc, close=True) from None
        has_body = chunked or bool(declared)
        try:  # 2. who is asking: Host and Origin allow-list (DNS rebinding)
            check_host(headers.get("host"), limits)
            check_origin(headers.get("origin"), limits)
            if path.rstrip("/") == "/slicer/exec":
                raise HandlerError("forbidden", "code execution is disabled: use the named handlers")
            # 3. the token (the /slicer subset is open on loopback with slicer_compat)
            slicer = path == "/slicer" or path.startswith("/slicer/")
            open_compat = slicer and self.server.slicer_compat and self._loopback(scope)
            if not open_compat and not self._authorised(headers):
                raise HandlerError("unauthorized", "missing or wrong bearer token")
        except HandlerError as exc:
            raise _Refusal(exc, close=has_body) from None
        # 4. the body, within the size and time limits
        body = await self._read_body(receive)
        if slicer:
            return await self._slicer(method, path, scope.get("query_string", b"").decode("latin-1"))
        return await self._route(method, path, body, scope.get("query_string", b"").decode("latin-1"))

    async def _route(self, method: str, path: str, body: bytes, query: str = "") -> Response:
        if path != API and not path.startswith(f"{API}/"):
            return self._response(404, _error_body("not_found", f"no route {method} {path}"))
        server = self.server
        status, obj = await run_in_threadpool(
            dispatch, server.session, method, path[len(API) :], body, jobs=server.jobs, limits=server.limits,
            query=query,
        )  # fmt: skip
        allow = obj.get("error", {}).get("allow") if status == 405 and isinstance(obj, dict) else None
        return self._response(status, _body(obj), extra={"Allow": ", ".join(allow)} if allow else None)

    async def _slicer(self, method: str, path: str, query: str) -> Response:
        if method != "GET":
            raise MethodNotAllowed("the /slicer subset is read-only: it takes GET", ("GET",))
        if not viewer_kind(self.server.session.kind).slicer_api:
            raise HandlerError("not_found", "the /slicer subset is served for radiology cases only", status=404)
        status, ctype, body = await run_in_threadpool(self.server.compat.handle, path, parse_qs(query))
        return self._response(status, body, ctype)


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket; the protocol is named so that asyncio turns Nagle off on accepted
    connections (otherwise a kept-alive client waits ~40 ms for the delayed ACK of every reply)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


class BoundServer:
    """uvicorn on a socket bound when made (so `url` is known before `serve_forever`), under the product's limits
    (the host it was bound to answers as an allowed Host); `serve` and `mcp --http` are both one."""

    path = ""  # what `url` ends with
    graceful_s = 5  # how long shutdown waits for requests in flight
    token: str  # set by the subclass before `_listen`
    limits: Limits

    def _limits(self, host: str, limits: Limits) -> None:
        extra = () if host in ("", "0.0.0.0", "::") or host in limits.allowed_hosts else (host.lower(),)
        self.limits = replace(limits, allowed_hosts=(*limits.allowed_hosts, *extra))

    def _listen(self, app: Any, host: str, port: int) -> None:
        self.socket = _bind(host, port)
        self.server_address = self.socket.getsockname()
        config = uvicorn.Config(
            app,
            lifespan="off",
            log_level="error",
            log_config=None,  # records reach the process's handlers (one line each: copilot.oneline)
            access_log=False,
            http=protocol_for(self),
            limit_concurrency=self.limits.max_connections,
            timeout_keep_alive=self.limits.keep_alive_s,
            timeout_graceful_shutdown=self.graceful_s,
            server_header=False,
        )
        self._uvicorn = uvicorn.Server(config)
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}{self.path}" if ":" in host else f"http://{host}:{port}{self.path}"

    def _run(self) -> None:
        self._uvicorn.run(sockets=[self.socket])

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until `shutdown()` (or SIGINT/SIGTERM when run in the main thread)."""
        self._stopped.clear()
        try:
            self._run()
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serving and wait until the server loop has ended."""
        self._uvicorn.should_exit = True
        self._stopped.wait(15)

    def server_close(self) -> None:
        self.socket.close()


class HandlerServer(BoundServer):
    """uvicorn serving one session's handlers (`serve`)."""

    def __init__(
        self,
        address: tuple[str, int],
        session: Session,
        token: str,
        slicer_compat: bool = False,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._limits(address[0], limits)
        self.session, self.token, self.slicer_compat = session, token, slicer_compat
        register_secret(token)  # cut out of every trace event, wherever a client puts it
        self.compat = SlicerCompat(session)
        self.jobs = JobManager(session, max_active=limits.max_jobs, kept=limits.kept_jobs)
        self._listen(HandlerApp(self), address[0], address[1])


def make_server(
    session: Session,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str = "",
    slicer_compat: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> HandlerServer:
    """Create (not start) a server; port 0 picks a free port."""
    if not token:
        raise ValueError("a bearer token is required")
    return HandlerServer((host, port), session, token, slicer_compat, limits)
