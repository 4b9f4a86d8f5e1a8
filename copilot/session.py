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
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from PIL import Image

from copilot.cases.pack import CaseLike
from copilot.engine.confine import case_folder
from copilot.engine.peek import Peek
from copilot.engine.png import PNG_ENCODER
from copilot.engine.volume.render import encode_png
from copilot.errors import HandlerError
from copilot.tools.registry import Cancelled, HandlerContext, Handlers, HandlerSpec, ImageOut, Progress
from copilot.tools.writes import (
    REFUSED,
    WRITE_EVENT,
    WriteConsent,
    WritePlan,
    allowed,
    attempt,
    bind,
    refusal_message,
    refused_by,
    store_folder,
)
from copilot.trace.outcome import CallOutcome, EncodedImage, json_text, jsonable
from copilot.trace.recorder import TraceRecorder
from copilot.viewer.protocol import StateT, Viewer, ViewerBase

__all__ = ["Listener", "Peek", "Session", "SessionState"]

Listener = Callable[[CallOutcome, "dict[str, Any] | None", str], None]  # fn(outcome, args, actor) after every call
Restore = Callable[[], None]  # puts the viewer back as it was when its state was exported
G = TypeVar("G")  # the geometry a caller expects of a view


def _saver(viewer: Viewer[StateT]) -> Callable[[], Restore]:
    """What exports the viewer's state and returns the call that puts it back: the state's own type stays between
    the viewer and this closure, so the session holds any viewer without knowing it."""

    def save() -> Restore:
        state = viewer.export_state()
        return lambda: viewer.restore_state(state)

    return save


class SessionState:
    """What `rewind` puts back: the viewer's exported state (behind `restore_viewer`) and a copy of the evidence
    (shared with the session's committed copy and with other saved states: nobody writes to it)."""

    def __init__(self, restore_viewer: Restore, evidence: list[dict[str, Any]]) -> None:
        self.restore_viewer = restore_viewer
        self.evidence = evidence


class Session:
    """Case + viewer + registry + trace; `call` is the only way to change anything."""

    def __init__(
        self,
        viewer: Viewer[StateT],
        registry: Handlers,
        case_root: Path | None = None,
        case_inputs: dict[str, Any] | None = None,
        track: str = "A",
        trace: TraceRecorder | None = None,
        case: CaseLike | None = None,
        png_encoder: str = PNG_ENCODER,
        allow_store: Sequence[str] = (),
    ) -> None:
        """`allow_store`: destinations (PACS URLs, folders) a headless run named with `--allow-store`; calls that
        write there run without asking (every other write needs the clinician's consent)."""
        self._viewer: ViewerBase = viewer
        self._save = _saver(viewer)  # export the viewer's state; what it returns puts the state back
        self.allow_store = tuple(allow_store)
        self.png_encoder = png_encoder  # the lossless encoder of the images this session returns and traces
        self._lock = threading.RLock()
        self._committed: str | None = None  # the state after the last completed call, as JSON text
        self._trace = trace
        self.case = case
        self.registry: Handlers = registry
        self.track = track
        self.kind: str = viewer.kind
        self._evidence: list[dict[str, Any]] = []
        # the evidence as the last completed call left it: a copy never written to (a failed call's rollback,
        # `save_state`), its JSON text (`evidence`), replaced only when a call changed the evidence
        self._evidence_committed: list[dict[str, Any]] = []
        self._evidence_text = "[]"
        self._listeners: list[Listener] = []
        root = case.root if case is not None and case_root is None else case_root
        inputs = case.inputs if case is not None and case_inputs is None else case_inputs
        output = trace.dir / "derived" if trace is not None else None
        if output is None or not allowed(output.resolve().as_uri(), self.allow_store):
            output = store_folder(self.allow_store) or output  # `--allow-store FOLDER`: exports go into that folder
        self._used_consents: set[str] = set()  # each consent covers one call
        self._ctx: HandlerContext[ViewerBase] = HandlerContext(viewer, root, self._evidence, dict(inputs or {}), output)
        show = getattr(viewer, "show_evidence", None)
        if show is not None:  # a Slicer scene shows the evidence as markups, following this list
            show(self._evidence)

    # ----- subscriptions -----
    def subscribe(self, fn: Listener, first: bool = False) -> Callable[[], None]:
        """Call `fn(outcome, args, actor)` after every call, whoever made it; `first` puts it before the others
        (a screen that follows the state, so that later listeners see it current). Returns the unsubscribe."""
        with self._lock:
            self._listeners.insert(0, fn) if first else self._listeners.append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._listeners:
                    self._listeners.remove(fn)

        return unsubscribe

    def unsubscribe_all(self) -> None:
        """Drop every listener (a host that replaces its panel)."""
        with self._lock:
            self._listeners.clear()

    # ----- read-only -----
    def snapshot(self, wait_s: float = -1) -> dict[str, Any]:
        """Viewer state plus the evidence recorded so far (what a call may change).

        With `wait_s` ≥ 0, a reader that finds a call in progress for longer than that gets the state the last
        completed call left (calls are atomic: the one in progress is not visible before it ends).
        """
        if not self._lock.acquire(timeout=wait_s):
            if self._committed is not None:
                return json.loads(self._committed)  # type: ignore[no-any-return]
            self._lock.acquire()
        try:
            self._committed = self._state_text()
            return json.loads(self._committed)  # type: ignore[no-any-return]
        finally:
            self._lock.release()

    def _state_text(self) -> str:
        """JSON text of the viewer state plus the evidence; the committed copy of the evidence follows it (copied
        again only when its text changed, which most calls, moving views, never do). Under the lock."""
        evidence = json_text(self._evidence)
        if evidence != self._evidence_text:
            self._evidence_committed, self._evidence_text = copy.deepcopy(self._evidence), evidence
        state = json_text(self._viewer.state())
        if state == "{}":
            return f'{{"evidence": {evidence}}}'
        if '"evidence"' in state:  # a viewer state of its own naming evidence: the session's list replaces it
            return json_text({**json.loads(state), "evidence": json.loads(evidence)})
        return f'{state[:-1]}, "evidence": {evidence}}}'  # the text json_text writes for the merged mapping

    def _commit_evidence(self) -> None:
        """Make the committed copy follow the evidence after a change outside a call (a rewind)."""
        self._evidence_committed = copy.deepcopy(self._evidence)
        self._evidence_text = json_text(self._evidence)

    def evidence(self) -> list[dict[str, Any]]:
        """A copy of the evidence recorded so far, taken under the lock (read from its committed JSON text)."""
        with self._lock:
            return json.loads(self._evidence_text)  # type: ignore[no-any-return]

    def save_state(self) -> SessionState:
        """The viewer's state and the evidence as the last completed call left them, for `rewind` (replay
        seeking, undo)."""
        with self._lock:
            return SessionState(self._save(), self._evidence_committed)

    def rewind(self, saved: SessionState) -> None:
        """Put the viewer and the evidence back as `save_state` found them (a replay's scrubber; not a call: the
        trace of a live session is never rewound). `saved` stays usable for later rewinds."""
        with self._lock:
            saved.restore_viewer()
            self._save()()  # a copy: later moves leave `saved` intact
            self._evidence[:] = copy.deepcopy(saved.evidence)
            self._commit_evidence()

    def handlers(self) -> list[dict[str, Any]]:
        return [s.describe() for s in self.registry.specs(self.track)]

    def view_geometry(self, view: str, expected: type[G]) -> G:
        """A copy of a view's geometry, of the type the caller `expected` (a slice view's `SliceView`, the slide
        viewport's `Viewport`), for conversions between screen and patient coordinates in a host's own widgets."""
        with self._lock:
            geometry = self._viewer.geometry(view)
        if not isinstance(geometry, expected):
            raise HandlerError("invalid_arguments", f"the {view} view has no {expected.__name__} geometry")
        return geometry

    @property
    def trace_dir(self) -> Path | None:
        return self._trace.dir if self._trace is not None else None

    def trace_events(self) -> list[dict[str, Any]]:
        """The events recorded so far (empty without a trace)."""
        return self._trace.events() if self._trace is not None else []

    def writes(self, name: str) -> bool:
        """Whether a handler is of the second kind (writes outside the session); False for an unknown name."""
        return name in self.registry and self.registry.get(name).writes is not None

    def plan_write(self, name: str, args: dict[str, Any] | None = None, actor: str = "agent") -> WritePlan | None:
        """What a call of the second kind would write outside the session and where (for the clinician's dialog),
        writing nothing; None for a call that only looks, or one that would be refused anyway (the call says why)."""
        with self._lock:
            try:
                spec = self.registry.get(name)
                if spec.writes is None or not self._offered(spec, actor):
                    return None
                kwargs = spec.validate(args)
                with case_folder(self._ctx.case_root):
                    plan: WritePlan = spec.writes(self._ctx, **kwargs)
                return bind(plan, args, actor, json_text(self._evidence))
            except Exception:  # the call itself will be refused, with its reason
                return None

    def note_declined_write(self, plan: WritePlan, args: dict[str, Any] | None, actor: str, decision: str) -> None:
        """Trace a write the clinician declined in a host's dialog (`rejected`, `stopped`): it never reached `call`."""
        self.note(WRITE_EVENT, attempt(plan, args, actor, decision, "clinician"))

    # ----- the ways in -----
    def call(
        self,
        name: str,
        args: dict[str, Any] | None = None,
        actor: str = "agent",
        progress: Progress | None = None,
        cancelled: Cancelled | None = None,
        consent: WriteConsent | None = None,
        call_id: str | None = None,
    ) -> CallOutcome:
        """Execute one handler call atomically; a refused or failed call changes nothing.

        `call_id` is the model's id of the tool call this answers (the trace joins a request and its calls by it).

        `progress(fraction, message)` and `cancelled()` are given to the handler when the call runs as a job. A call
        that writes outside the session runs only with `consent` to its plan (from `plan_write`, shown to the
        clinician) or when `allow_store` names every destination; otherwise it is refused (`write_not_approved`).
        """
        with self._lock:
            if self._trace is not None and self._trace.failed is not None:  # nothing is done unrecorded
                raise self._trace.failed
            t0 = time.perf_counter()
            self._ctx.progress, self._ctx.cancelled = progress, cancelled
            try:
                outcome = self._execute(name, args, actor, consent)
            finally:
                self._ctx.progress = self._ctx.cancelled = None
            duration_ms = (time.perf_counter() - t0) * 1000.0
            if self._trace is not None:
                outcome.seq = self._trace.record_call(name, args, actor, outcome, duration_ms, call_id)
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(outcome, args, actor)
        return outcome

    def peek(self, request: Peek, blocking: bool = True) -> dict[str, Image.Image] | None:
        """Images of a `Peek` with the viewer put back exactly as it was; None when not `blocking` and busy.

        Invalid requests raise `HandlerError` (and change nothing).
        """
        if not self._lock.acquire(blocking=blocking):
            return None
        try:
            restore = self._save()
            try:
                return self._viewer.peek(request)
            finally:
                restore()
        finally:
            self._lock.release()

    def scene_data(self, blocking: bool = True) -> dict[str, Any] | None:
        """Read-only voxels for a host's 3D view: the active volume (volumes are immutable), its window/level and
        the segments; {} without a volume, None when not `blocking` and busy."""
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
    def _offered(self, spec: HandlerSpec, actor: str) -> bool:
        """Whether this actor may call the handler in this track: the track's handlers, and for the clinician also
        the exports (their own Store, which still needs their yes to its plan)."""
        return self.track in spec.tracks or (actor == "clinician" and spec.writes is not None)

    def _authorize(
        self,
        spec: HandlerSpec,
        args: dict[str, Any] | None,
        kwargs: dict[str, Any],
        actor: str,
        consent: WriteConsent | None,
    ) -> None:
        """Let a call of the second kind through only with consent to its plan or an `--allow-store` naming every
        destination; each attempt is traced (what, where, decision, by whom). Raises the refusal."""
        assert spec.writes is not None
        try:
            with case_folder(self._ctx.case_root):
                plan: WritePlan = bind(spec.writes(self._ctx, **kwargs), args, actor, json_text(self._evidence))
        except HandlerError:
            raise
        except Exception as exc:  # a source the planner cannot read: refused, nothing written
            raise HandlerError("invalid_source", f"{spec.name}: {type(exc).__name__}: {exc}") from exc
        given = consent if isinstance(consent, WriteConsent) else None
        fresh = given is not None and given.nonce not in self._used_consents
        if given is not None and fresh and given.covers(plan, args):
            decision, by = "approved", "clinician"
            self._used_consents.add(given.nonce)
        elif plan.destinations and all(allowed(d, self.allow_store) for d in plan.destinations):
            decision, by = "allowed", "--allow-store"
        else:
            decision, by = "refused", refused_by(consent, plan, args, used=given is not None and not fresh)
        self.note(WRITE_EVENT, attempt(plan, args, actor, decision, by))
        if decision == "refused":
            raise HandlerError(REFUSED, refusal_message(plan), status=403)

    def _execute(
        self, name: str, args: dict[str, Any] | None, actor: str = "agent", consent: WriteConsent | None = None
    ) -> CallOutcome:
        try:
            spec = self.registry.get(name)
            if not self._offered(spec, actor):
                raise HandlerError("not_in_track", f"{name} is not available in track {self.track}")
            kwargs = spec.validate(args)
            if spec.writes is not None:
                self._authorize(spec, args, kwargs, actor, consent)
        except HandlerError as exc:
            return CallOutcome(name, False, exc.status, error=exc.to_json())
        restore_viewer = self._save()
        saved_memo = {k: list(v) if isinstance(v, list) else v for k, v in self._ctx.memo.items()}  # entries immutable
        try:
            with case_folder(self._ctx.case_root):  # every file a load opens is confined to the case
                out = spec.impl(self._ctx, **kwargs)
            images = [EncodedImage(im.view, im.mime, _encoded(im, self.png_encoder), im.label) for im in out.images]
            return CallOutcome(name, True, 200, jsonable(out.result), self.snapshot(), images)
        except Exception as exc:  # any failure: put everything back as it was
            restore_viewer()
            self._evidence[:] = copy.deepcopy(self._evidence_committed)  # as the last completed call left it
            self._ctx.memo.clear()
            self._ctx.memo.update(saved_memo)  # a failed call showed the model nothing
            if isinstance(exc, HandlerError):
                return CallOutcome(name, False, exc.status, error=exc.to_json())
            return CallOutcome(
                name, False, 500, error={"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
            )


def _encoded(image: ImageOut, encoder: str) -> bytes:
    """A handler's image as bytes: as given (JPEG, APNG) or encoded as PNG."""
    if image.data is not None:
        return image.data
    if image.image is None:
        raise ValueError(f"the {image.view} image has neither data nor pixels")
    return encode_png(image.image, encoder)
