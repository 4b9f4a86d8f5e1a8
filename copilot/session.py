"""A session: one viewer, one handler registry, one case and one trace, behind one lock.

Every call, whoever makes it (agent, clinician panel, HTTP client, replay), goes through
`Session.call`: look up, track check, argument validation, execution, rollback on any
failure, rendering to PNG, state snapshot and trace event, all under the same lock, so that
calls are applied one at a time and recorded in the order they were applied.
"""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path
from typing import Any

from copilot.engine.render import encode_png
from copilot.errors import HandlerError
from copilot.tools.registry import HandlerContext, Registry
from copilot.trace.outcome import CallOutcome, EncodedImage, jsonable
from copilot.trace.recorder import TraceRecorder


class Session:
    """Viewer + registry + case + trace; `call` is the only way in."""

    def __init__(
        self,
        viewer: Any,
        registry: Registry,
        case_root: Path | None = None,
        case_inputs: dict[str, Any] | None = None,
        track: str = "A",
        trace: TraceRecorder | None = None,
    ) -> None:
        self.viewer = viewer
        self.registry = registry
        self.track = track
        self.trace = trace
        self.lock = threading.RLock()
        self.evidence: list[dict[str, Any]] = []
        self.listeners: list[Any] = []  # fn(outcome, args, actor), called after every call (e.g. the panel)
        output = trace.dir / "derived" if trace is not None else None
        self.ctx = HandlerContext(viewer, case_root, self.evidence, dict(case_inputs or {}), output)

    def snapshot(self) -> dict[str, Any]:
        """Viewer state plus the evidence recorded so far (what a call may change)."""
        with self.lock:
            return jsonable({**self.viewer.state(), "evidence": self.evidence})

    def handlers(self) -> list[dict[str, Any]]:
        return [s.describe() for s in self.registry.specs(self.track)]

    def call(
        self,
        name: str,
        args: dict[str, Any] | None = None,
        actor: str = "agent",
        progress: Any = None,
        cancelled: Any = None,
    ) -> CallOutcome:
        """Execute one handler call atomically; a refused or failed call changes nothing.

        `progress(fraction, message)` and `cancelled()` are given to the handler when the call runs as a job.
        """
        with self.lock:
            t0 = time.perf_counter()
            self.ctx.progress, self.ctx.cancelled = progress, cancelled
            try:
                outcome = self._execute(name, args)
            finally:
                self.ctx.progress = self.ctx.cancelled = None
            duration_ms = (time.perf_counter() - t0) * 1000.0
            if self.trace is not None:
                outcome.seq = self.trace.record_call(name, args, actor, outcome, duration_ms)
        for listener in list(self.listeners):
            listener(outcome, args, actor)
        return outcome

    def _execute(self, name: str, args: dict[str, Any] | None) -> CallOutcome:
        try:
            spec = self.registry.get(name)
            if self.track not in spec.tracks:
                raise HandlerError("not_in_track", f"{name} is not available in track {self.track}")
            kwargs = spec.validate(args)
        except HandlerError as exc:
            return CallOutcome(name, False, exc.status, error=exc.to_json())
        saved_viewer = self.viewer.export_state()
        saved_evidence = copy.deepcopy(self.evidence)
        try:
            out = spec.impl(self.ctx, **kwargs)
            images = [
                EncodedImage(im.view, im.mime, im.data if im.data is not None else encode_png(im.image), im.label)
                for im in out.images
            ]
            return CallOutcome(name, True, 200, jsonable(out.result), self.snapshot(), images)
        except Exception as exc:  # any failure: put everything back as it was
            self.viewer.restore_state(saved_viewer)
            self.evidence[:] = saved_evidence
            if isinstance(exc, HandlerError):
                return CallOutcome(name, False, exc.status, error=exc.to_json())
            return CallOutcome(
                name, False, 500, error={"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
            )
