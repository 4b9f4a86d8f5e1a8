"""The handler HTTP server (`medcopilot serve`): `/medcopilot/v1` plus a read-only `/slicer` subset.

Standard-library `ThreadingHTTPServer`: one thread per connection; every handler call goes
through `Session.call`, which serialises calls under the session lock. Bound to 127.0.0.1
unless told otherwise; every request needs `Authorization: Bearer TOKEN`, except the `/slicer`
subset when `slicer_compat` is on and the client is on loopback (Slicer WebServer clients
send no token). `/slicer/exec` is always refused.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from copilot.errors import HandlerError
from copilot.jobs import JobManager
from copilot.kinds import viewer_kind
from copilot.server.slicer_compat import SlicerCompat
from copilot.session import Session

API = "/medcopilot/v1"
MAX_BODY = 1 << 20


class HandlerServer(ThreadingHTTPServer):
    """HTTP server bound to one session."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], session: Session, token: str, slicer_compat: bool = False) -> None:
        super().__init__(address, _RequestHandler)
        self.session = session
        self.token = token
        self.slicer_compat = slicer_compat
        self.compat = SlicerCompat(session)
        self.jobs = JobManager(session)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _RequestHandler(BaseHTTPRequestHandler):
    server: HandlerServer
    protocol_version = "HTTP/1.1"
    server_version = "MedCopilot"

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        return

    # ----- plumbing -----
    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj, allow_nan=False).encode("utf-8"))

    def _error(self, status: int, code: str, message: str) -> None:
        self._json(status, {"ok": False, "error": {"code": code, "message": message}})

    def _authorised(self) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.server.token.encode())

    def _loopback_client(self) -> bool:
        try:
            return ipaddress.ip_address(self.client_address[0]).is_loopback
        except ValueError:
            return False

    def _read_body(self) -> bytes | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._error(413, "too_large", f"request body over {MAX_BODY} bytes")
            return None
        return self.rfile.read(length) if length else b""

    # ----- routing -----
    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def _route(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        body = self._read_body()
        if body is None:
            return
        if path.startswith("/slicer/") or path == "/slicer":
            self._slicer(method, path, parts.query)
            return
        if not self._authorised():
            self._error(401, "unauthorized", "missing or wrong bearer token")
            return
        if path == f"{API}/handlers" and method == "GET":
            self._json(200, {"handlers": self.server.session.handlers(), "track": self.server.session.track})
        elif path.startswith(f"{API}/handlers/") and method == "POST":
            self._call(path[len(f"{API}/handlers/") :], body)
        elif path == f"{API}/state" and method == "GET":
            self._json(200, {"ok": True, "state": self.server.session.snapshot()})
        elif path == f"{API}/trace" and method == "GET":
            self._trace()
        elif path.startswith(f"{API}/jobs/"):
            self._job(method, path[len(f"{API}/jobs/") :], body)
        elif path.startswith(API):
            self._error(405 if _known(path) else 404, "not_found", f"no route {method} {path}")
        else:
            self._error(404, "not_found", f"no route {method} {path}")

    def _call(self, name: str, body: bytes) -> None:
        try:
            args = json.loads(body or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._error(400, "invalid_json", f"request body is not JSON: {exc}")
            return
        outcome = self.server.session.call(name, args, actor="http")
        self._json(outcome.status, outcome.envelope())

    def _job(self, method: str, name: str, body: bytes) -> None:
        """POST /jobs/HANDLER starts a call off the request thread (202); GET /jobs/ID polls it; DELETE cancels."""
        jobs = self.server.jobs
        if method == "POST":
            if name not in self.server.session.registry:
                self._error(404, "unknown_handler", f"no handler named {name!r}")
                return
            try:
                args = json.loads(body or b"{}")
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                self._error(400, "invalid_json", f"request body is not JSON: {exc}")
                return
            self._json(202, jobs.submit(name, args if isinstance(args, dict) else {"_": args}, actor="http").to_json())
            return
        job = jobs.get(name)
        if job is None:
            self._error(404, "not_found", f"no job {name!r}")
        elif method == "GET":
            self._json(200, job.to_json())
        elif method == "DELETE":
            self._json(202, jobs.cancel(name).to_json())  # type: ignore[union-attr]
        else:
            self._error(405, "not_found", f"{method} is not allowed on a job")

    def _trace(self) -> None:
        self._json(200, {"ok": True, "events": self.server.session.trace_events()})

    def _slicer(self, method: str, path: str, query: str) -> None:
        if path.rstrip("/") == "/slicer/exec":
            self._error(403, "forbidden", "code execution is disabled: use the named handlers")
            return
        open_compat = self.server.slicer_compat and self._loopback_client()
        if not open_compat and not self._authorised():
            self._error(401, "unauthorized", "missing or wrong bearer token")
            return
        if method != "GET":
            self._error(405, "read_only", "the /slicer subset is read-only")
            return
        if not viewer_kind(self.server.session.kind).slicer_api:
            self._error(404, "not_found", "the /slicer subset is served for radiology cases only")
            return
        try:
            status, ctype, body = self.server.compat.handle(path, parse_qs(query))
        except HandlerError as exc:
            self._error(exc.status, exc.code, exc.message)
            return
        self._send(status, body, ctype)


def _known(path: str) -> bool:
    return path in (f"{API}/handlers", f"{API}/state", f"{API}/trace") or path.startswith(f"{API}/handlers/")


def make_server(
    session: Session, host: str = "127.0.0.1", port: int = 0, token: str = "", slicer_compat: bool = False
) -> HandlerServer:
    """Create (not start) a server; port 0 picks a free port."""
    if not token:
        raise ValueError("a bearer token is required")
    return HandlerServer((host, port), session, token, slicer_compat)
