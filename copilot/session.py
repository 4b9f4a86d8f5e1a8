"""A session: the front door to one case, its viewer, its handler registry and its trace, behind one lock.

Every call, whoever makes it (agent, clinician panel, HTTP client, replay), goes through
`Session.call`: look up, track check, argument validation, execution, rollback on any
failure, rendering to PNG, state snapshot and trace event, all under the same lock, so that
calls are applied one at a time and recorded in the order they were applied. Besides calls, the
session offers only what callers legitimately need: a render that leaves the views where they are
(`peek`), a note in the trace (`note`), read-only state, and `close`. The viewer, the lock and the
trace recorder are private to it.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from copilot.cases.pack import CasePack
from copilot.engine.confine import case_folder
from copilot.engine.render import encode_png
from copilot.errors import HandlerError
from copilot.tools.registry import HandlerContext, ImageOut, Registry
from copilot.trace.outcome import CallOutcome, EncodedImage, jsonable
from copilot.trace.recorder import TraceRecorder


@dataclass(frozen=True)
class Peek:
    """A render that leaves the views as they are: a view re-oriented, moved to an offset (or a fraction of its
    range), or the scene centred on a RAS point or a level-0 slide point, only for this image."""

    views: tuple[str, ...] = ()  # radiology: () = the layout's views; pathology: ignored (one viewer)
    size: tuple[int, int] = (256, 256)
    orientation: str | None = None
    offset: float | None = None
    scroll_to: float | None = None
    ras: tuple[float, float, float] | None = None
    wsi_point: tuple[float, float] | None = None
    background: str | None = None  # radiology: this volume alone as the background (e.g. a prior study beside)
    fill: bool = False  # pathology: render at `size`, the agent's field scaled to fit it (a host's pane)


class Session:
    """Case + viewer + registry + trace; `call` is the only way to change anything."""

    def __init__(
        self,
        viewer: Any,
        registry: Registry,
        case_root: Path | None = None,
        case_inputs: dict[str, Any] | None = None,
        track: str = "A",
        trace: TraceRecorder | None = None,
        case: CasePack | None = None,
    ) -> None:
        self._viewer = viewer
        self._lock = threading.RLock()
        self._committed: dict[str, Any] | None = None  # the state after the last completed call
        self._trace = trace
        self.case = case
        self.registry = registry
        self.track = track
        self.kind: str = viewer.kind
        self.evidence: list[dict[str, Any]] = []
        self.listeners: list[Any] = []  # fn(outcome, args, actor), called after every call (e.g. the panel)
        root = case.root if case is not None and case_root is None else case_root
        inputs = case.inputs if case is not None and case_inputs is None else case_inputs
        output = trace.dir / "derived" if trace is not None else None
        self._ctx = HandlerContext(viewer, root, self.evidence, dict(inputs or {}), output)

    # ----- read-only -----
    def snapshot(self, wait_s: float = -1) -> dict[str, Any]:
        """Viewer state plus the evidence recorded so far (what a call may change).

        With `wait_s` ≥ 0, a reader that finds a call in progress for longer than that gets the state the last
        completed call left (calls are atomic: the one in progress is not visible before it ends).
        """
        if not self._lock.acquire(timeout=wait_s):
            if self._committed is not None:
                return copy.deepcopy(self._committed)
            self._lock.acquire()
        try:
            self._committed = jsonable({**self._viewer.state(), "evidence": self.evidence})
            return copy.deepcopy(self._committed)
        finally:
            self._lock.release()

    def handlers(self) -> list[dict[str, Any]]:
        return [s.describe() for s in self.registry.specs(self.track)]

    def view_geometry(self, view: str) -> Any:
        """A copy of a slice view's geometry (`SliceView`) or of the slide viewport (`Viewport`), for conversions
        between screen and patient coordinates in a host's own widgets."""
        with self._lock:
            return copy.deepcopy(self._viewer.viewport if self.kind == "pathology" else self._viewer.view(view))

    @property
    def trace_dir(self) -> Path | None:
        return self._trace.dir if self._trace is not None else None

    def trace_events(self) -> list[dict[str, Any]]:
        """The events recorded so far (empty without a trace)."""
        return self._trace.events() if self._trace is not None else []

    # ----- the ways in -----
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
        with self._lock:
            t0 = time.perf_counter()
            self._ctx.progress, self._ctx.cancelled = progress, cancelled
            try:
                outcome = self._execute(name, args)
            finally:
                self._ctx.progress = self._ctx.cancelled = None
            duration_ms = (time.perf_counter() - t0) * 1000.0
            if self._trace is not None:
                outcome.seq = self._trace.record_call(name, args, actor, outcome, duration_ms)
        for listener in list(self.listeners):
            listener(outcome, args, actor)
        return outcome

    def peek(self, request: Peek, blocking: bool = True) -> dict[str, Image.Image] | None:
        """Images of a `Peek` with the viewer put back exactly as it was; None when not `blocking` and busy.

        Invalid requests raise `HandlerError` (and change nothing).
        """
        if not self._lock.acquire(blocking=blocking):
            return None
        try:
            saved = self._viewer.export_state()
            try:
                return self._peek(request)
            finally:
                self._viewer.restore_state(saved)
        finally:
            self._lock.release()

    def scene_data(self, blocking: bool = True) -> dict[str, Any] | None:
        """Read-only voxels for a host's 3D view: the active volume (volumes are immutable), its window/level and
        the segments; {} without a volume, None when not `blocking` and busy."""
        if self.kind != "radiology":
            return {}
        if not self._lock.acquire(blocking=blocking):
            return None
        try:
            return self._viewer.scene_data()
        finally:
            self._lock.release()

    def note(self, event_type: str, payload: dict[str, Any]) -> None:
        """Record an event that is not a handler call (model turns, reads, the episode's answer)."""
        if self._trace is not None:
            self._trace.record(event_type, payload)

    def close(self, final: dict[str, Any] | None = None) -> None:
        """End the episode: the trace gets its end event and is closed (idempotent)."""
        if self._trace is not None:
            self._trace.close(final)

    # ----- inside -----
    def _peek(self, r: Peek) -> dict[str, Image.Image]:
        viewer = self._viewer
        if self.kind == "pathology":
            if not viewer.has_image():
                return {}
            if r.wsi_point is not None:
                viewer.set_centre(*r.wsi_point)
            if r.fill:
                vp = viewer.viewport
                scale = max(vp.width / r.size[0], vp.height / r.size[1])
                vp.width, vp.height, vp.downsample = int(r.size[0]), int(r.size[1]), vp.downsample * scale
            return {"viewer": viewer.render()}
        if not viewer.volume_ids():
            return {}
        views = r.views or tuple(viewer.layout_views())
        if r.background is not None:
            viewer.set_fusion(viewer.resolve_volume(volume_id=r.background), None, 0.0)
        if r.ras is not None:
            viewer.jump(np.asarray(r.ras, dtype=float))
        for name in views:
            if r.orientation is not None and r.orientation != viewer.view(name).orientation:
                viewer.set_orientation(name, r.orientation)
            offset = r.offset
            if r.scroll_to is not None:
                if not 0.0 <= r.scroll_to <= 1.0:
                    raise HandlerError("invalid_arguments", "scrollTo must lie in [0, 1]")
                lo, hi = viewer.slice_offset_range(name)
                offset = lo + r.scroll_to * (hi - lo)
            if offset is not None:
                viewer.set_slice_offset(name, offset)
        return {name: viewer.render(name, r.size, remember=False) for name in views}

    def _execute(self, name: str, args: dict[str, Any] | None) -> CallOutcome:
        try:
            spec = self.registry.get(name)
            if self.track not in spec.tracks:
                raise HandlerError("not_in_track", f"{name} is not available in track {self.track}")
            kwargs = spec.validate(args)
        except HandlerError as exc:
            return CallOutcome(name, False, exc.status, error=exc.to_json())
        saved_viewer = self._viewer.export_state()
        saved_evidence = copy.deepcopy(self.evidence)
        saved_memo = {k: list(v) if isinstance(v, list) else v for k, v in self._ctx.memo.items()}  # entries immutable
        try:
            with case_folder(self._ctx.case_root):  # every file a load opens is confined to the case
                out = spec.impl(self._ctx, **kwargs)
            images = [EncodedImage(im.view, im.mime, _encoded(im), im.label) for im in out.images]
            return CallOutcome(name, True, 200, jsonable(out.result), self.snapshot(), images)
        except Exception as exc:  # any failure: put everything back as it was
            self._viewer.restore_state(saved_viewer)
            self.evidence[:] = saved_evidence
            self._ctx.memo.clear()
            self._ctx.memo.update(saved_memo)  # a failed call showed the model nothing
            if isinstance(exc, HandlerError):
                return CallOutcome(name, False, exc.status, error=exc.to_json())
            return CallOutcome(
                name, False, 500, error={"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
            )


def _encoded(image: ImageOut) -> bytes:
    """A handler's image as bytes: as given (JPEG, APNG) or encoded as PNG."""
    if image.data is not None:
        return image.data
    if image.image is None:
        raise ValueError(f"the {image.view} image has neither data nor pixels")
    return encode_png(image.image)
