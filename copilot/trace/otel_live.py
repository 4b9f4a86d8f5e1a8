"""Live export of a trace as OpenTelemetry GenAI spans while it is written (`MEDCOPILOT_OTEL=1` with the standard
`OTEL_EXPORTER_OTLP_*` variables).

The recorder hands each event, as hashed and written, to `LiveExport.event`, which only queues it; a background
thread turns events into spans (`copilot.trace.otel.SpanBuilder`) and posts the finished ones in small batches, the
episode's span at its end. Export never stands in the way of the record: a collector that is down, slow or refuses
costs a warning in the log (once per problem and process) and the spans, never an event or a call.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from copilot.trace.otel import Span, SpanBuilder, export_request
from copilot.trace.otlp import OtlpError, OtlpTarget, content_wanted, post, resource, target_from_env

LIVE_ENV = "MEDCOPILOT_OTEL"
BATCH_SPANS = 64  # spans posted together at most
FLUSH_S = 2.0  # finished spans wait at most this long
CLOSE_WAIT_S = 5.0  # how long closing a trace waits for its last spans to go out
_log = logging.getLogger("copilot.trace.otel")
_warned: set[str] = set()
_DONE = object()


def _warn(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        _log.warning("OpenTelemetry export: %s", message)


class LiveExport:
    """One trace's spans, posted as they finish."""

    def __init__(self, target: OtlpTarget, resource_attrs: Mapping[str, Any], content: bool = False) -> None:
        self.target, self.resource = target, dict(resource_attrs)
        self.builder = SpanBuilder(content)
        self.version = ""
        self.sent = 0  # spans the collector took
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="otel-export", daemon=True)
        self._thread.start()

    def event(self, event: Mapping[str, Any]) -> None:
        """Queue one recorded event (cheap; called under the recorder's lock, so in trace order)."""
        self._queue.put(event)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Send what is left and stop, waiting at most `wait_s` for the collector."""
        self._queue.put(_DONE)
        self._thread.join(wait_s)

    def _run(self) -> None:
        pending: list[Span] = []
        due = time.monotonic() + FLUSH_S
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, due - time.monotonic()))
            except queue.Empty:
                item = None
            if item is _DONE:
                self._send(pending + self.builder.finish())
                return
            if item is not None:
                if item.get("type") == "episode_start":
                    self.version = str(item.get("medcopilot_version") or "")
                try:
                    pending += self.builder.feed(item)
                except Exception as exc:  # an event the mapping cannot read: skipped, never fatal
                    _warn(f"event {item.get('seq')} not exported ({type(exc).__name__}: {exc})")
            if len(pending) >= BATCH_SPANS or (pending and time.monotonic() >= due) or self.builder.root is None:
                self._send(pending)
                pending = []
            if time.monotonic() >= due:
                due = time.monotonic() + FLUSH_S

    def _send(self, spans: list[Span]) -> None:
        if not spans or self.builder.trace_id is None:
            return
        try:
            rejected = post(export_request(spans, self.builder.trace_id, self.resource, self.version), self.target)
        except OtlpError as exc:
            _warn(str(exc))
            return
        self.sent += len(spans) - rejected
        if rejected:
            _warn(f"collector {self.target.where()} rejected {rejected} spans")


def live_export(env: Mapping[str, str] | None = None) -> LiveExport | None:
    """A live exporter when `MEDCOPILOT_OTEL` asks for one and a collector is configured; None otherwise (a
    configuration that cannot work is named in the log once)."""
    env = os.environ if env is None else env
    if env.get(LIVE_ENV, "").strip().lower() not in ("1", "true", "yes"):
        return None
    try:
        target = target_from_env(env)
    except OtlpError as exc:
        _warn(f"{LIVE_ENV} is set but {exc}")
        return None
    return LiveExport(target, resource(env), content_wanted(env))
