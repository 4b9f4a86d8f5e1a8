"""Writing traces: `trace.jsonl` (one hash-chained event per line) and `artifacts/` (PNGs).

Each event carries `prev` (the SHA-256 of the previous event's line) and `hash` (the SHA-256
of its own canonical JSON without `hash`), so that editing, removing or reordering any event
is detected. Lines are the canonical JSON of the event, so the bytes are reproducible.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from copilot.privatefs import open_private, private_dir, write_private
from copilot.trace.otel_live import live_export
from copilot.trace.outcome import CallOutcome
from copilot.trace.redact import redact

GENESIS = "0" * 64
TRACE_FILE = "trace.jsonl"
ARGS_TRACE_BYTES = 4096  # a refused call's arguments beyond this: their first bytes, their size and SHA-256
NAME_TRACE_CHARS = 128  # a refused call's handler name beyond this is cut
MESSAGE_TRACE_CHARS = 2048  # a refused call's error message beyond this is cut
ARTIFACTS = "artifacts"
FORMAT_VERSION = 1
# made once: `json.dumps` with these options would build a new encoder for every value (thread-safe to share)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace, no NaN: the form that is hashed and written."""
    return _CANONICAL.encode(obj)


def event_hash(event: dict[str, Any]) -> str:
    body = {k: v for k, v in event.items() if k != "hash"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def hashed_line(event: dict[str, Any]) -> tuple[str, str]:
    """`event_hash(event)` and the canonical line of the event with that hash, each top-level value encoded once
    (the same bytes as `canonical_json` of the event with its `hash`: sorted keys, the same separators)."""
    parts = sorted((k, canonical_json(k) + ":" + canonical_json(v)) for k, v in event.items() if k != "hash")
    digest = hashlib.sha256(("{" + ",".join(p for _, p in parts) + "}").encode("utf-8")).hexdigest()
    parts.append(("hash", canonical_json("hash") + ":" + canonical_json(digest)))
    parts.sort()
    return digest, "{" + ",".join(p for _, p in parts) + "}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def bounded_refusal(name: str, args: Any, error: dict[str, Any] | None) -> dict[str, Any]:
    """What a refused call leaves in the trace: arguments over `ARGS_TRACE_BYTES` as their first bytes (secrets
    redacted first), size and SHA-256 (`args_truncated`); long names and messages cut. A caller that sends
    megabytes of refused arguments grows the trace by a few kilobytes a call."""
    safe = redact(args if args is not None else {})
    try:
        text = canonical_json(safe)
    except ValueError:  # arguments that JSON cannot hold (NaN): recorded as text
        text = repr(safe)
        safe = {"unserialisable": text}
    data = text.encode("utf-8", "replace")
    out: dict[str, Any] = {"handler": _cut(name, NAME_TRACE_CHARS), "args": safe}
    if len(data) > ARGS_TRACE_BYTES or len(name) > NAME_TRACE_CHARS:
        head = data[:ARGS_TRACE_BYTES].decode("utf-8", "ignore")
        out["args"] = {"head": head, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        out["args_truncated"] = True
    out["error"] = error
    if isinstance(error, dict) and "message" in error:
        out["error"] = {**error, "message": _cut(str(error["message"]), MESSAGE_TRACE_CHARS)}
    return out


class TraceWriteError(OSError):
    """The trace could not be written (a full disk, a removed folder): the session stops, since what it would do
    next could not be recorded."""

    def __init__(self, path: Path, cause: OSError) -> None:
        why = cause.strerror or type(cause).__name__
        super().__init__(cause.errno, f"the trace {path} could not be written ({why}); the session stopped, "
                         "nothing more is done until it can be (free disk space and start a new session)")  # fmt: skip
        self.path = path

    def __str__(self) -> str:
        return str(self.strerror)


class TraceRecorder:
    """Appends events to a trace directory; thread-safe, flushed after every event. A write that fails raises
    `TraceWriteError`, and so does every later event (`failed`)."""

    def __init__(self, trace_dir: str | Path, header: dict[str, Any]) -> None:
        self.dir = Path(trace_dir)
        private_dir(self.dir)  # owner-only: a trace is patient data
        private_dir(self.dir / ARTIFACTS)
        self.path = self.dir / TRACE_FILE
        if self.path.exists() and self.path.stat().st_size:
            raise FileExistsError(f"{self.path} already holds a trace; use a new directory")
        self._fh = open_private(self.path, "w")
        self._lock = threading.Lock()
        self._seq = 0
        self._prev = GENESIS
        self.failed: TraceWriteError | None = None
        self._live = live_export()  # spans to an OpenTelemetry collector as events are written (MEDCOPILOT_OTEL)
        self.record("episode_start", {"format": FORMAT_VERSION, **header})

    def record(self, event_type: str, payload: dict[str, Any]) -> int:
        """Append one event, secrets redacted (`copilot.trace.redact`); returns its sequence number."""
        payload = redact(payload)
        with self._lock:
            event = {"seq": self._seq, "type": event_type, "time": round(time.time(), 3), "prev": self._prev, **payload}
            event["hash"], line = hashed_line(event)
            if self.failed is not None:
                raise self.failed
            try:
                self._fh.write(line + "\n")
                self._fh.flush()
            except OSError as exc:  # nothing after this event may be done unrecorded
                self.failed = TraceWriteError(self.path, exc)
                raise self.failed from exc
            self._prev = hashlib.sha256(line.encode("utf-8")).hexdigest()
            if self._live is not None:
                self._live.event(event)
            seq: int = event["seq"]
            self._seq += 1
            return seq

    def record_call(
        self, name: str, args: dict[str, Any] | None, actor: str, outcome: CallOutcome, duration_ms: float,
        call_id: str | None = None,
    ) -> int:  # fmt: skip
        """A handler call with its arguments, result or error, state snapshot and image hashes."""
        seq = self._seq
        images = []
        for n, im in enumerate(outcome.images):
            ext = "jpg" if im.mime == "image/jpeg" else "png"  # the exact bytes the model received
            rel = f"{ARTIFACTS}/{seq:06d}_{n}_{im.view}.{ext}"
            try:
                write_private(self.dir / rel, im.data)
            except OSError as exc:
                self.failed = self.failed or TraceWriteError(self.dir / rel, exc)
                raise self.failed from exc
            images.append({**im.to_json(with_data=False), "artifact": rel})
        payload: dict[str, Any] = {
            "actor": actor,
            "handler": name,
            "args": args if args is not None else {},
            "ok": outcome.ok,
            "status": outcome.status,
            "duration_ms": round(duration_ms, 3),
        }
        if call_id is not None:  # the model's tool-call id this call answers
            payload["tool_call_id"] = call_id
        if outcome.ok:
            payload.update(result=outcome.result, state=outcome.state, images=images)
        else:
            payload.update(bounded_refusal(name, args, outcome.error))
        try:
            return self.record("handler_call", payload)
        except ValueError:  # arguments that JSON cannot hold (NaN): record them as text
            payload["args"] = {"unserialisable": repr(args)}
            return self.record("handler_call", payload)

    def events(self) -> list[dict[str, Any]]:
        """The events written so far, read back line by line (split at newlines only: U+2028 may occur in a
        line)."""
        with self._lock, self.path.open("r", encoding="utf-8", newline="\n") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    def close(self, final: dict[str, Any] | None = None) -> None:
        """Write the episode end (with an optional final answer/status) and close the file."""
        if self._fh.closed:
            return
        if self.failed is not None:  # the trace stays without its end: `replay` and `sessions list` say truncated
            with self._lock, contextlib.suppress(OSError):
                self._fh.close()
            return
        self.record("episode_end", final or {})
        with self._lock:
            self._fh.close()
        if self._live is not None:
            self._live.close()
