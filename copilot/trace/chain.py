"""Reading a trace and verifying its hash chain, the one reader every replay starts from.

Every line must be the canonical JSON of its event, carry its own sequence number, its own correct hash and
the SHA-256 of the line before it (`GENESIS` for the first), and the first event must be `episode_start`. The
first fault raises a named `TraceChainError` saying which event and why; the events verified before it travel
with the error. A trace read a page at a time (`copilot.trace.paging`) is verified page after page by one
`ChainVerifier`, each page continuing from the last event of the one before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from copilot.trace.recorder import GENESIS, TRACE_FILE, canonical_json, event_hash


class TraceChainError(ValueError):
    """A trace that cannot be trusted: `seq` is the first bad event (its line number), `events` those verified
    before it; the message names the event and what is wrong with it."""

    def __init__(self, seq: int, reason: str, events: list[dict[str, Any]] | None = None) -> None:
        super().__init__(reason)
        self.seq, self.reason = seq, reason
        self.events: list[dict[str, Any]] = events if events is not None else []


class MissingTrace(TraceChainError):
    """The folder holds no trace file."""


class NotJSON(TraceChainError):
    """A line that is not UTF-8 JSON (bytes edited or cut)."""


class EditedEvent(TraceChainError):
    """An event whose line is not its canonical form or whose content no longer matches its hash."""


class BrokenChain(TraceChainError):
    """An event out of place: a wrong sequence number, or a `prev` that is not the hash of the line before (an
    event edited, removed or reordered)."""


class NoEpisodeStart(TraceChainError):
    """A trace that does not begin with its `episode_start` header."""


def _where(n: int, event: Any) -> str:
    """How an error names event `n`: its number, type and handler."""
    if not isinstance(event, dict):
        return f"event {n}"
    return f"event {n} ({event.get('type')} {event.get('handler', '')})".replace(" )", ")")


class ChainVerifier:
    """Follows one trace's chain event after event (a file's lines, or the pages of `GET /trace`)."""

    def __init__(self) -> None:
        self.prev = GENESIS  # the SHA-256 of the last verified line
        self.seq = 0  # the sequence number the next event must carry
        self.events: list[dict[str, Any]] = []  # verified so far

    def line(self, raw: bytes) -> dict[str, Any]:
        """Verify the next line (its bytes, without the newline) and return its event."""
        n = self.seq
        try:
            event = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise NotJSON(n, f"line {n + 1} is not valid JSON", self.events) from None
        if not isinstance(event, dict) or canonical_json(event).encode("utf-8") != raw:
            raise EditedEvent(n, f"{_where(n, event)} is not in canonical form (edited)", self.events)
        return self._accept(event, hashlib.sha256(raw).hexdigest())

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        """Verify the next event already parsed (from a page of the trace); its line is its canonical JSON."""
        if not isinstance(event, dict):
            raise EditedEvent(self.seq, f"{_where(self.seq, event)} is not an event", self.events)
        try:
            line = canonical_json(event).encode("utf-8")
        except ValueError:
            raise EditedEvent(self.seq, f"{_where(self.seq, event)} holds a value JSON cannot", self.events) from None
        return self._accept(event, hashlib.sha256(line).hexdigest())

    def _accept(self, event: dict[str, Any], line_hash: str) -> dict[str, Any]:
        n, where = self.seq, _where(self.seq, event)
        if event.get("seq") != n:
            raise BrokenChain(n, f"{where} has sequence number {event.get('seq')}", self.events)
        if event.get("hash") != event_hash(event):
            raise EditedEvent(n, f"{where}: content does not match its hash (edited)", self.events)
        if event.get("prev") != self.prev:
            raise BrokenChain(n, f"{where}: chain broken (previous event edited or removed)", self.events)
        if n == 0 and event.get("type") != "episode_start":
            raise NoEpisodeStart(0, "the trace does not begin with episode_start", self.events)
        self.prev, self.seq = line_hash, n + 1
        self.events.append(event)
        return event

    def page(self, events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Verify one page of events continuing the chain; returns them."""
        return [self.event(e) for e in events]


def _lines(path: Path) -> Iterator[bytes]:
    """A trace file's lines without their newline, read one at a time (split at b"\\n" only: U+2028 may occur
    inside a line); a last line without a newline is read too."""
    with path.open("rb") as fh:
        for raw in fh:
            yield raw[:-1] if raw.endswith(b"\n") else raw


def read_trace(trace_dir: str | Path) -> list[dict[str, Any]]:
    """The verified events of the trace in `trace_dir`; the first fault raises its `TraceChainError`."""
    path = Path(trace_dir) / TRACE_FILE
    if not path.is_file():
        raise MissingTrace(0, f"no {TRACE_FILE} in {trace_dir}")
    chain = ChainVerifier()
    for raw in _lines(path):
        chain.line(raw)
    if not chain.events:
        raise NoEpisodeStart(0, "the trace does not begin with episode_start")
    return chain.events
