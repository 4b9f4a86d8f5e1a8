"""Fair service under a connection flood: the cap means what the documentation says, one client address cannot
hold every slot, and connections without the token never starve a client that has it."""

from __future__ import annotations

import http.client
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from copilot.runtime import open_session
from copilot.server.http import HandlerServer, make_server
from copilot.server.limits import DEFAULT_LIMITS, Limits
from copilot.session import Session

PARTIAL = b"GET /medcopilot/v1/state HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # headers never finished


@pytest.fixture(scope="module")
def session(brain_case: Path) -> Session:
    return open_session(brain_case)


def serve(session: Session, limits: Limits) -> tuple[HandlerServer, str]:
    token = secrets.token_urlsafe(16)
    server = make_server(session, "127.0.0.1", 0, token, limits=limits)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, token


@pytest.fixture
def running(session: Session, request: pytest.FixtureRequest) -> Iterator[tuple[HandlerServer, str]]:
    server, token = serve(session, getattr(request, "param", DEFAULT_LIMITS))
    yield server, token
    server.shutdown()
    server.server_close()


def status(port: int, token: str | None, path: str = "/medcopilot/v1/state", timeout: float = 10) -> int:
    """One request on a new connection; its status (0: no answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        conn.request("GET", path, headers=headers)
        return conn.getresponse().status
    except OSError:
        return 0
    finally:
        conn.close()


def idle_sockets(port: int, n: int, payload: bytes = b"") -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        if payload:
            s.sendall(payload)
        socks.append(s)
    time.sleep(0.3)  # let the server register them
    return socks


@pytest.mark.parametrize("running", [replace(DEFAULT_LIMITS, max_pending_per_client=1000)], indirect=True)
def test_the_cap_is_exact(running: tuple[HandlerServer, str]) -> None:
    """The documented cap is 64 connections: with 63 idle ones open the 64th is served (401 without a token, not
    503); with 64 open, a 65th without the token is refused 503 while one with the token is still served."""
    server, token = running
    port = server.server_address[1]
    assert server.limits.max_connections == 64
    socks = idle_sockets(port, 63)
    try:
        assert status(port, None) == 401
        socks += idle_sockets(port, 1)
        assert status(port, None) == 503
        assert status(port, token) == 200
    finally:
        for s in socks:
            s.close()


def test_one_address_recycles_its_own_pending_slots(running: tuple[HandlerServer, str]) -> None:
    """At most 16 pending connections per address past their first second: opening 20, then one more after the
    grace, makes the server close the 5 oldest."""
    server, _ = running
    socks = idle_sockets(server.server_address[1], 20, PARTIAL)
    time.sleep(server.limits.pending_grace_s)
    socks += idle_sockets(server.server_address[1], 1, PARTIAL)
    try:
        closed = []
        for n, s in enumerate(socks):
            s.settimeout(0.05)
            try:
                data = s.recv(4096)
                closed.append((n, b"503" in data.split(b"\r\n", 1)[0] or data == b""))
            except TimeoutError:
                pass
        assert [n for n, _ in closed] == [0, 1, 2, 3]  # 20 old ones, 16 kept (the 21st is still in its grace)
    finally:
        for s in socks:
            s.close()


def test_flood_of_slow_sockets_cannot_starve_an_authenticated_client(running: tuple[HandlerServer, str]) -> None:
    """80 sockets that send half a request and are reopened as soon as the server closes them; meanwhile an
    authenticated client (a new connection per request, and a kept-alive one) gets 200 for ≥ 95 % of requests."""
    server, token = running
    port = server.server_address[1]
    stop = threading.Event()
    reopened = [0]

    def flood() -> None:
        socks = idle_sockets(port, 80, PARTIAL)
        while not stop.is_set():
            for i, s in enumerate(socks):
                s.settimeout(0.001)
                try:
                    s.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    pass
                s.close()  # closed by the server: open another at once
                socks[i] = socket.create_connection(("127.0.0.1", port))
                socks[i].sendall(PARTIAL)
                reopened[0] += 1
        for s in socks:
            s.close()

    attacker = threading.Thread(target=flood, daemon=True)
    attacker.start()
    time.sleep(server.limits.pending_grace_s + 0.5)  # every flood socket is past its grace: all may be closed
    try:
        fresh = []
        for _ in range(30):
            fresh.append(status(port, token))
            time.sleep(0.03)
        kept = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        kept_statuses = []
        for _ in range(30):
            try:
                kept.request("GET", "/medcopilot/v1/state", headers={"Authorization": f"Bearer {token}"})
                response = kept.getresponse()
                response.read()
                kept_statuses.append(response.status)
                time.sleep(0.03)
            except (OSError, http.client.HTTPException):
                kept_statuses.append(0)
                kept.close()
                kept = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        kept.close()
    finally:
        stop.set()
        attacker.join(10)
    statuses = fresh + kept_statuses
    print(f"flood: {sum(s == 200 for s in statuses)}/{len(statuses)} authenticated requests 200; {reopened[0]} reopens")
    assert reopened[0] >= 60  # the flood did push: its oldest pending sockets were closed and reopened
    assert sum(s == 200 for s in statuses) >= 0.95 * len(statuses), statuses
