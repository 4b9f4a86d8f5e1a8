"""uvicorn's h11 protocol with the server's own refusals as JSON envelopes, and a deadline on request headers.

uvicorn answers a request h11 cannot parse (e.g. a malformed `Content-Length`) and a request over the
connection cap in plain text, and it waits for a first request's headers without any limit, so a
client that connects and sends nothing (or a byte at a time) holds one of the capped connections.
Here those refusals are `{"ok": false, "error": {"code", "message"}}` like every other one, and a
connection whose request headers are not complete within `Limits.header_timeout_s` is answered 408
and closed. The subclass is selected through uvicorn's `http=` setting; nothing of uvicorn is patched.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Protocol

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol
from uvicorn.server import ServerState

from copilot.server.fairness import ConnectionBook, header, token_matches
from copilot.server.limits import Limits


class LimitsOwner(Protocol):
    """Whatever holds the server's current limits (read at each connection, so tests may change them) and token."""

    limits: Limits
    token: str


def error_body(code: str, message: str) -> bytes:
    """The JSON error envelope every refusal of the HTTP server carries."""
    return json.dumps({"ok": False, "error": {"code": code, "message": message}}).encode("utf-8")


def refusal_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """Headers of a refusal that ends the connection."""
    return [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        (b"cache-control", b"no-store"),
        (b"x-content-type-options", b"nosniff"),
    ]


class EnvelopeH11Protocol(H11Protocol):
    """One HTTP/1.1 connection: uvicorn's h11 handling with JSON refusals and a request-header deadline."""

    owner: LimitsOwner
    book: ConnectionBook  # one per server: the connections by client address, pending or authenticated

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        # the cap is checked here (same counts as uvicorn's) so that its refusal is an envelope
        self.connection_cap, self.limit_concurrency = self.limit_concurrency, None
        self.app = self._capped(self.app)
        self.header_timer: asyncio.TimerHandle | None = None

    def _capped(self, app: Any) -> Any:
        async def refuse(send: Any, cap: int) -> None:
            body = error_body("too_many_connections", f"the server holds its limit of {cap} connections")
            await send({"type": "http.response.start", "status": 503, "headers": refusal_headers(body)})
            await send({"type": "http.response.body", "body": body, "more_body": False})

        async def capped(scope: Any, receive: Any, send: Any) -> None:
            cap = self.connection_cap
            if cap is None:
                await app(scope, receive, send)
                return
            if token_matches(header(scope, b"authorization"), getattr(self.owner, "token", "")):
                # counted only against other authenticated requests: pending connections cannot starve it
                self.book.authenticate(self)
                if self.book.in_flight_authenticated >= cap:
                    await refuse(send, cap)
                    return
                self.book.in_flight_authenticated += 1
                try:
                    await app(scope, receive, send)
                finally:
                    self.book.in_flight_authenticated -= 1
                return
            # this connection and this request's own task are already counted: the cap-th is still served
            if len(self.connections) > cap or len(self.tasks) > cap:
                await refuse(send, cap)
                return
            await app(scope, receive, send)

        return capped

    # request-header deadline
    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self.header_timer = self.loop.call_later(self.owner.limits.header_timeout_s, self._headers_timed_out)

    def _cancel_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _headers_timed_out(self) -> None:
        self.header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        limit = self.owner.limits.header_timeout_s
        self.refuse(408, "request_timeout", f"request headers not received within {limit:g} s")

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()
        limits = self.owner.limits
        address = self.client[0] if self.client else ""
        per_client, total, grace = limits.max_pending_per_client, limits.max_open_connections, limits.pending_grace_s
        for victim in self.book.opened(self, address, per_client, total, grace):
            victim.refuse(503, "too_many_connections", "too many connections from one client without the token")

    def data_received(self, data: bytes) -> None:
        if self.header_timer is None and self.conn.their_state is h11.IDLE:
            self._arm_header_timer()  # the next request on a kept-alive connection has begun
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._cancel_header_timer()  # headers complete (or refused)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        self.book.closed(self)
        super().connection_lost(exc)

    # refusals before the application sees a request
    def send_400_response(self, msg: str) -> None:
        message = "the request is not valid HTTP/1.1 (request line, header or body framing, e.g. Content-Length)"
        self.refuse(400, "invalid_request", message)

    def refuse(self, status: int, code: str, message: str) -> None:
        """Answer with an envelope and close; when a response has already begun, only close."""
        body = error_body(code, message)
        try:
            head = h11.Response(status_code=status, headers=refusal_headers(body), reason=STATUS_PHRASES[status])
            for event in (head, h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event) or b"")
        except h11.LocalProtocolError:
            pass
        self.transport.close()


def protocol_for(owner: LimitsOwner) -> type[EnvelopeH11Protocol]:
    """The protocol class for one server (uvicorn makes one instance per connection)."""
    return type("ServerH11Protocol", (EnvelopeH11Protocol,), {"owner": owner, "book": ConnectionBook()})
