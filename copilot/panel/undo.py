"""Undo for the desktop (Qt-free): each change of the scene, the agent's or the clinician's, can be taken back
through the session's rewind, the most recent first. A clinician's gesture made of several calls (a pan) is one
step. Every undo is traced (`UNDO_EVENT`, naming the calls taken back and the call whose state is restored), and
a replay rewinds at the same place, so the trace still verifies."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from copilot.replay import UNDO_EVENT
from copilot.session import Session, SessionState
from copilot.trace.outcome import CallOutcome

UNDO_DEPTH = 50  # steps kept (the oldest are forgotten)


@dataclass
class UndoStep:
    """What one undo takes back: the calls (handler, actor, seq) and the state before the first of them."""

    before: SessionState
    before_seq: int | None  # the last traced call before it (0: the episode's start)
    calls: list[tuple[str, str, int | None]] = field(default_factory=list)

    @property
    def actor(self) -> str:
        return self.calls[0][1] if self.calls else ""

    def title(self) -> str:
        names = " + ".join(dict.fromkeys(h for h, _, _ in self.calls))
        return f"{names} ({self.actor})"


class UndoHistory:
    """The steps that can be undone, kept by following every call of a session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.steps: list[UndoStep] = []
        self._now = session.save_state()  # the state after the last call
        self._state_json = json.dumps(session.snapshot(), sort_keys=True, default=str)
        calls = [e["seq"] for e in session.trace_events() if e.get("type") == "handler_call"]
        self._seq: int | None = calls[-1] if calls else 0  # the last call traced before the history began
        self._group: UndoStep | None = None
        self._lock = threading.Lock()
        self.unsubscribe = session.subscribe(self._on_call)

    def _on_call(self, outcome: CallOutcome, args: Any, actor: str) -> None:
        if not outcome.ok or not outcome.state:
            return
        after = json.dumps(outcome.state, sort_keys=True, default=str)
        with self._lock:
            changed = after != self._state_json
            if changed and self._group is not None:
                self._group.calls.append((outcome.name, actor, outcome.seq))
            elif changed:
                self.steps.append(UndoStep(self._now, self._seq, [(outcome.name, actor, outcome.seq)]))
                del self.steps[:-UNDO_DEPTH]
            self._state_json = after
            self._now = self.session.save_state()
            self._seq = outcome.seq if outcome.seq is not None else self._seq

    @contextmanager
    def gesture(self) -> Iterator[UndoStep]:
        """Calls made inside are one step (a pan is two zooms); the step is yielded (its calls so far)."""
        with self._lock:
            self._group = UndoStep(self._now, self._seq)
            group = self._group
        try:
            yield group
        finally:
            with self._lock:
                group, self._group = self._group, None
                if group is not None and group.calls:
                    self.steps.append(group)

    def last(self, actor: str | None = None) -> UndoStep | None:
        """The most recent step (of `actor` when given)."""
        return next((s for s in reversed(self.steps) if actor is None or s.actor == actor), None)

    def undo(self, by: str = "clinician") -> UndoStep:
        """Take back the most recent step: the scene and evidence as they were before it, traced. Raises
        IndexError when there is nothing to undo."""
        with self._lock:
            if not self.steps:
                raise IndexError("nothing to undo")
            step = self.steps.pop()
        self.session.rewind(step.before)
        undone = [{"handler": h, "actor": a, "seq": s} for h, a, s in step.calls]
        self.session.note(UNDO_EVENT, {"by": by, "to_seq": step.before_seq, "undone": undone})
        with self._lock:
            self._now = self.session.save_state()
            self._state_json = json.dumps(self.session.snapshot(), sort_keys=True, default=str)
            self._seq = step.before_seq
        return step
