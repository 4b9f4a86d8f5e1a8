"""Serving `/medcopilot/v1` from Slicer's WebServer module, without `exec`.

Slicer's WebServer calls request handlers with `(method, uri, requestBody)` only (keyword arguments;
`WebServerLib.BaseRequestHandler`), answers 200 with the returned `(contentType, body)`, 404 for an
empty body and 500 on an exception — it cannot set other status codes or read headers. So the bearer
token travels as `access_token=` in the query string, and refusals are JSON envelopes with
`ok: false` and the error code and the HTTP status the embedded server would use (`status`).
Bodies go through the same request validation as the embedded server (`copilot.server.limits`: size,
nesting depth, integer digits, finite numbers → `invalid_json`), and traces are read as JSON lines split
at `\n` only. The WebServer passes no headers, so there is no Host check here: every route needs the
token, which a rebound page cannot know.
`route()` is Slicer-independent and tested outside Slicer; `make_handler()` builds the WebServer class.
"""

from __future__ import annotations

import hmac
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from copilot.server.dispatch import dispatch
from copilot.server.routes import API as PREFIX
from copilot.server.routes import error
from copilot.trace.redact import register_secret


def _json(obj: Any) -> tuple[bytes, bytes]:
    return b"application/json", json.dumps(obj).encode("utf-8")


def route(session: Any, token: str, method: str, uri: bytes | str, body: bytes | None) -> tuple[bytes, bytes]:
    """The `/medcopilot/v1` API on a session through the project's one route table (no jobs here: Slicer's
    WebServer answers on the application's main thread)."""
    raw = uri.decode("utf-8") if isinstance(uri, bytes) else uri
    parts = urlsplit(raw)
    given = (parse_qs(parts.query).get("access_token") or [""])[0]
    if not token or not hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8")):
        return _json({"status": 401, **error("unauthorized", "missing or wrong access_token")})
    path = parts.path
    if path != PREFIX and not path.startswith(f"{PREFIX}/"):
        return _json({"status": 404, **error("not_found", f"no route {method} {path}")})
    status, obj = dispatch(session, method, path[len(PREFIX) :], body, timeout=False, query=parts.query)
    if status >= 400 and isinstance(obj, dict):
        obj = {**obj, "status": status}  # Slicer's WebServer answers 200: the status travels in the body
    return _json(obj)


def make_handler(session: Any, token: str) -> Any:
    """A `WebServerLib.BaseRequestHandler` serving the session (import inside Slicer only)."""
    from WebServerLib import BaseRequestHandler

    register_secret(token)  # cut out of every trace event

    class MedCopilotRequestHandler(BaseRequestHandler):
        def canHandleRequest(self, method: str, uri: bytes, requestBody: bytes) -> float:
            return 0.9 if uri.startswith(PREFIX.encode()) else 0.0

        def handleRequest(self, method: str, uri: bytes, requestBody: bytes) -> tuple[bytes, bytes]:
            return route(session, token, method, uri, requestBody)

    return MedCopilotRequestHandler()
