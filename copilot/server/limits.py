"""Request validation shared by every HTTP entry point (the embedded server and Slicer's WebServer route).

Bodies are parsed as JSON only within fixed limits (size, nesting depth, integer digits, finite
numbers), and `Host`/`Origin` are checked against an allow-list so that a page that rebinds its own
domain name to 127.0.0.1 cannot talk to a loopback server. Every refusal is a `HandlerError` with a
code and a message; nothing here touches a session.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from copilot.errors import HandlerError

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPEN = np.zeros(256, dtype=np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


@dataclass(frozen=True)
class Limits:
    """Bounds on what one request may make the server hold or do."""

    max_body: int = 1 << 20  # bytes of a request body
    max_depth: int = 64  # nesting of JSON arrays/objects
    max_int_digits: int = 40  # digits of a JSON integer
    header_timeout_s: float = 10.0  # from connecting (or a kept-alive request's first byte) to the end of its headers
    body_timeout_s: float = 30.0  # time to receive a whole body
    call_timeout_s: float = 30.0  # a synchronous handler call; longer work runs as a job
    keep_alive_s: int = 5  # idle time before a kept-alive connection is closed
    max_connections: int = 64  # open connections and in-flight requests, each (the 64th is served; see fairness.py)
    max_pending_per_client: int = 16  # connections of one client address without the token, older than the grace
    pending_grace_s: float = 1.0  # a new connection's time to present its headers before it may be closed for others
    max_open_connections: int = 256  # connections of every kind (beyond: the oldest pending one is closed)
    max_jobs: int = 4  # queued or running jobs
    kept_jobs: int = 64  # finished jobs kept for polling (oldest dropped first)
    allowed_hosts: tuple[str, ...] = field(default=LOOPBACK_HOSTS)


DEFAULT_LIMITS = Limits()


def _bad_json(message: str) -> HandlerError:
    return HandlerError("invalid_json", message, status=400)


def json_depth(body: bytes) -> int:
    """Deepest nesting of arrays/objects in a JSON text (string contents ignored)."""
    if not body:
        return 0
    stripped = _STRING.sub(b'""', body)
    steps = _OPEN[np.frombuffer(stripped, dtype=np.uint8)]
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


def _parse_int(limits: Limits):  # type: ignore[no-untyped-def]
    def parse(text: str) -> int:
        if len(text.lstrip("-")) > limits.max_int_digits:
            raise _bad_json(f"an integer has more than {limits.max_int_digits} digits")
        return int(text)

    return parse


def parse_json_body(body: bytes | str | None, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The JSON value of a request body (`{}` when empty), or HandlerError('invalid_json', 400).

    NaN, Infinity and numbers beyond float range parse to non-finite floats on purpose: the handler
    schemas refuse them with `invalid_arguments` naming the field, as they do for in-process callers.
    """
    if body is None or len(body) == 0:
        return {}
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    if len(raw) > limits.max_body:
        raise HandlerError("too_large", f"request body over {limits.max_body} bytes", status=413)
    if json_depth(raw) > limits.max_depth:
        raise _bad_json(f"request body nests deeper than {limits.max_depth} levels")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad_json(f"request body is not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        return json.loads(text, parse_int=_parse_int(limits))
    except json.JSONDecodeError as exc:
        raise _bad_json(f"request body is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise _bad_json(f"request body is not acceptable JSON: {exc}") from None


def host_name(header: str) -> str:
    """The host part of a `Host` header value (brackets of an IPv6 literal removed, port dropped); anything after
    the host other than `:digits` leaves the value whole, so that it matches no allowed name."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :] if end >= 0 else ""
        if end < 0 or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return value
        return value[1:end]
    if value.count(":") == 1:
        name, port = value.split(":")
        return name if port.isdigit() else value
    return value


def check_host(host: str | None, limits: Limits = DEFAULT_LIMITS) -> None:
    """Refuse a request whose `Host` is not an allowed name (a rebound domain name, or none)."""
    if not host:
        raise HandlerError("host_not_allowed", "the request has no Host header", status=403)
    name = host_name(host)
    if name not in limits.allowed_hosts:
        raise HandlerError(
            "host_not_allowed",
            f"Host {name!r} is not served here (allowed: {', '.join(limits.allowed_hosts)})",
            status=403,
        )


def check_origin(origin: str | None, limits: Limits = DEFAULT_LIMITS) -> None:
    """Refuse a browser request coming from a page whose origin is not an allowed host."""
    if origin is None:
        return
    parts = urlsplit(origin.strip())
    if (parts.hostname or "").lower() not in limits.allowed_hosts or parts.scheme not in ("http", "https"):
        raise HandlerError("origin_not_allowed", f"requests from origin {origin[:100]!r} are refused", status=403)


def content_length(value: str | None, limits: Limits = DEFAULT_LIMITS) -> int | None:
    """The declared body size, checked before any byte is read: None when absent."""
    if value is None:
        return None
    text = value.strip()
    if not text.isdigit() or not text.isascii():
        raise HandlerError("invalid_request", f"Content-Length {value[:40]!r} is not a non-negative integer", 400)
    length = int(text[:20]) if len(text) <= 20 else limits.max_body + 1
    if length > limits.max_body:
        raise HandlerError("too_large", f"request body over {limits.max_body} bytes", status=413)
    return length
