"""Clients of the handler API: `RemoteViewer` over HTTP and `LocalClient` in-process.

Both return the same `Reply` (HTTP status + JSON envelope), so one contract test suite runs
against either, and against a 3D Slicer that serves the same API.
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from copilot.session import Session


@dataclass
class Reply:
    """HTTP status and decoded JSON body of one request."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.body.get("ok"))

    @property
    def result(self) -> dict[str, Any]:
        return self.body.get("result", {})

    @property
    def state(self) -> dict[str, Any]:
        return self.body.get("state", {})

    @property
    def error_code(self) -> str | None:
        err = self.body.get("error") if isinstance(self.body, dict) else None
        return err.get("code") if err else None

    def images(self) -> list[tuple[str, bytes]]:
        """(view, decoded image bytes) pairs."""
        return [(im["view"], base64.b64decode(im["data_base64"])) for im in self.body.get("images", [])]


class RemoteViewer:
    """HTTP client of `/medcopilot/v1` (embedded server or the Slicer module).

    With `keep_alive` each thread reuses one connection (reopened once if the server closed it while idle).
    """

    def __init__(self, base_url: str, token: str, timeout: float = 120.0, keep_alive: bool = True) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url}")
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.token, self.timeout, self.keep_alive = token, timeout, keep_alive
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None) if self.keep_alive else None
        if conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            conn = cls(self.host, self.port, timeout=self.timeout)
            if self.keep_alive:
                self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's kept-alive connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        auth: bool = True,
        raw: bool = False,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        sent: dict[str, Any] = {"Content-Type": "application/json", **(headers or {})}
        if auth:  # as UTF-8 bytes: http.client would send text as Latin-1 (or fail on a non-Latin-1 token)
            sent["Authorization"] = f"Bearer {self.token}".encode()
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                conn.request(method, path, body=data, headers=sent)
                resp = conn.getresponse()
                payload = resp.read()
                ctype = resp.getheader("Content-Type", "")
                got = {k.lower(): v for k, v in resp.getheaders()}
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if not (reused and attempt == 0):  # only a stale kept-alive connection is retried
                    raise
            finally:
                if not self.keep_alive:
                    conn.close()
        if raw or not ctype.startswith("application/json"):
            return Reply(resp.status, payload, got)
        return Reply(resp.status, json.loads(payload), got)

    def call(self, name: str, args: dict[str, Any] | None = None) -> Reply:
        return self.request("POST", f"/medcopilot/v1/handlers/{name}", args if args is not None else {})

    def handlers(self) -> list[dict[str, Any]]:
        return self.request("GET", "/medcopilot/v1/handlers").body["handlers"]

    def state(self) -> dict[str, Any]:
        return self.request("GET", "/medcopilot/v1/state").body["state"]

    def trace(self) -> list[dict[str, Any]]:
        """Every event of the trace, page after page."""
        events: list[dict[str, Any]] = []
        after = -1
        while True:
            page = self.request("GET", f"/medcopilot/v1/trace?after={after}").body
            events += page["events"]
            if not page.get("more"):
                return events
            after = page["next_after"]


class LocalClient:
    """The same interface as `RemoteViewer`, calling a session in-process (JSON round-tripped)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def call(self, name: str, args: dict[str, Any] | None = None) -> Reply:
        out = self.session.call(name, args if args is not None else {}, actor="local")
        return Reply(out.status, json.loads(json.dumps(out.envelope())))

    def handlers(self) -> list[dict[str, Any]]:
        return self.session.handlers()

    def state(self) -> dict[str, Any]:
        return self.session.snapshot()
