"""Fair service under a connection flood: who holds the server's connections, and who may be served.

A connection counts as *authenticated* once one of its requests has presented the server's token; before
that it is *pending*. The rules, applied by the HTTP protocol (`copilot.server.protocol`):

- **Per client address** (loopback included), at most `Limits.max_pending_per_client` pending connections
  older than `Limits.pending_grace_s` (1 s): a further connection from that address makes its oldest such
  connection close (a 503 `too_many_connections` envelope when a request could still be answered). A client
  that opens sockets and never completes a request thereby recycles its own slots, at most that many a
  second; a new connection, such as a legitimate client's, has a second to send its headers before it can
  be the one dropped.
- **In total**, at most `Limits.max_open_connections` connections of all kinds (file descriptors are
  finite): a further one makes the oldest pending connection anywhere close.
- **The cap** (`Limits.max_connections`, 64): a request without the token is answered 503 when more than 64
  connections are open or more than 64 requests are in flight; the 64th is served. A request that presents
  the token is counted only against other authenticated requests (at most 64 in flight), so connections
  that never authenticate cannot starve a client that holds the token.
"""

from __future__ import annotations

import hmac
import time
from collections import OrderedDict
from typing import Any


def token_matches(authorization: bytes | str | None, token: str) -> bool:
    """Whether an `Authorization` header carries `Bearer <token>` (constant-time; UTF-8 tokens compared as bytes,
    whatever encoding the header arrived in: raw bytes, or text decoded as Latin-1 by the server)."""
    if not authorization or not token:
        return False
    raw = authorization if isinstance(authorization, bytes) else authorization.encode("latin-1", "replace")
    scheme, _, given = raw.strip().partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token.encode("utf-8"))


def header(scope: dict[str, Any], name: bytes) -> bytes | None:
    """The first raw value of a request header (ASGI scope headers are lower-case byte pairs)."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


class ConnectionBook:
    """Open connections of one server by client address, pending or authenticated, oldest first."""

    def __init__(self) -> None:
        self._pending: OrderedDict[Any, tuple[str, float]] = (
            OrderedDict()
        )  # connection → (address, opened), oldest first
        self._authenticated: set[Any] = set()
        self.in_flight_authenticated = 0
        self.evicted = 0

    def opened(self, conn: Any, address: str, per_client: int, total: int, grace_s: float) -> list[Any]:
        """Record a new connection; returns the pending connections to close to keep within the limits."""
        now = time.monotonic()
        self._pending[conn] = (address, now)
        victims: list[Any] = []
        old = [c for c, (a, t) in self._pending.items() if a == address and now - t >= grace_s]
        victims += old[: max(0, len(old) - per_client)]
        excess = len(self._pending) + len(self._authenticated) - total
        if excess > 0:
            victims += [c for c in self._pending if c not in victims and c is not conn][:excess]
        for c in victims:
            self._pending.pop(c, None)
        self.evicted += len(victims)
        return victims

    def authenticate(self, conn: Any) -> None:
        """A request on this connection presented the token: it is no longer pending."""
        if self._pending.pop(conn, None) is not None or conn not in self._authenticated:
            self._authenticated.add(conn)

    def is_authenticated(self, conn: Any) -> bool:
        return conn in self._authenticated

    def closed(self, conn: Any) -> None:
        self._pending.pop(conn, None)
        self._authenticated.discard(conn)

    def pending(self, address: str | None = None) -> int:
        return sum(1 for a, _ in self._pending.values() if address is None or a == address)
