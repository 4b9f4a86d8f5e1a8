"""Where OTLP/JSON export requests go: the collector named by the standard `OTEL_EXPORTER_OTLP_*` variables (or an
explicit endpoint), its headers and timeout, the resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), and
the HTTP POST itself (the standard library only: no SDK). Only the `http/json` protocol is spoken; a configuration
asking for another is refused by name rather than sent a body it cannot read.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from copilot.trace.redact import redact_text

TRACES_PATH = "/v1/traces"
DEFAULT_TIMEOUT_S = 10.0
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"  # "true": message content, arguments, results


class OtlpError(RuntimeError):
    """An export that cannot be configured or was not accepted; the message says which and why (no secrets)."""


@dataclass(frozen=True)
class OtlpTarget:
    """A collector's traces URL, the headers each request carries and the time one may take."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S

    def where(self) -> str:
        """The URL as messages show it (credentials redacted)."""
        return redact_text(self.url)


def traces_url(endpoint: str) -> str:
    """A collector's base URL with the OTLP/HTTP traces path (kept when already there)."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OtlpError(f"not an http(s) collector URL: {redact_text(endpoint)!r}")
    return endpoint if parts.path.rstrip("/").endswith(TRACES_PATH) else endpoint.rstrip("/") + TRACES_PATH


def _pairs(text: str, what: str) -> dict[str, str]:
    """`key=value,key2=value2` with percent-encoded values (the OTEL variables' list form)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, v = item.partition("=")
        if not sep or not key.strip():
            raise OtlpError(f"{what}: expected key=value pairs separated by commas")
        out[unquote(key.strip())] = unquote(v.strip())
    return out


def _pick(env: Mapping[str, str], *names: str) -> str:
    return next((env[n] for n in names if env.get(n, "").strip()), "").strip()


def target_from_env(env: Mapping[str, str] | None = None, endpoint: str | None = None) -> OtlpTarget:
    """The collector to export to: `endpoint` (a base URL, or one ending in /v1/traces) or, without it,
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (+ /v1/traces); headers
    and timeout (milliseconds) from their `_TRACES_` or general variables."""
    env = os.environ if env is None else env
    protocol = _pick(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol and protocol != "http/json":
        raise OtlpError(f"OTLP protocol {protocol!r} is not supported: set OTEL_EXPORTER_OTLP_PROTOCOL=http/json")
    if endpoint:
        url = traces_url(endpoint)
    elif specific := _pick(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        traces_url(specific)  # checked, used as it is
        url = specific
    elif base := _pick(env, "OTEL_EXPORTER_OTLP_ENDPOINT"):
        url = traces_url(base)
    else:
        raise OtlpError("no collector: give --endpoint URL or set OTEL_EXPORTER_OTLP_ENDPOINT")
    headers: dict[str, str] = {}
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):  # the signal's own win
        headers.update(_pairs(env.get(name, ""), name))
    timeout = _pick(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
    try:
        timeout_s = float(timeout) / 1000.0 if timeout else DEFAULT_TIMEOUT_S
    except ValueError:
        raise OtlpError(f"OTLP timeout {timeout!r} is not a number of milliseconds") from None
    return OtlpTarget(url, headers, timeout_s if timeout_s > 0 else DEFAULT_TIMEOUT_S)


def resource(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The exporting service: `service.name` (`OTEL_SERVICE_NAME`, else medcopilot) and `OTEL_RESOURCE_ATTRIBUTES`."""
    env = os.environ if env is None else env
    try:
        extra = _pairs(env.get("OTEL_RESOURCE_ATTRIBUTES", ""), "OTEL_RESOURCE_ATTRIBUTES")
    except OtlpError:
        extra = {}  # a malformed resource list never stops an export
    return {**extra, "service.name": _pick(env, "OTEL_SERVICE_NAME") or extra.get("service.name") or "medcopilot"}


def content_wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment opts in to message content (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`)."""
    env = os.environ if env is None else env
    return env.get(CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


def post(request: Mapping[str, Any], target: OtlpTarget) -> int:
    """POST one export request; returns the number of spans the collector rejected (its partial success).
    A refusal, an unreachable collector or a timeout raises `OtlpError`."""
    body = json.dumps(request, separators=(",", ":")).encode("utf-8")
    headers = {**target.headers, "Content-Type": "application/json"}
    req = urllib.request.Request(target.url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=target.timeout_s) as reply:  # an http(s) URL (traces_url)
            answer = reply.read(1 << 20)
    except urllib.error.HTTPError as exc:
        raise OtlpError(f"collector {target.where()} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OtlpError(f"collector {target.where()} not reachable ({reason})") from None
    try:
        partial = json.loads(answer or b"{}").get("partialSuccess") or {}
        return int(partial.get("rejectedSpans") or 0)
    except (ValueError, AttributeError, TypeError):
        return 0
