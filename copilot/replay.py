"""Replaying a trace: the one re-execution behind `medcopilot replay`, the desktop's timeline and a host's trace.

The chain is read and verified by `copilot.trace.chain`. Then `TraceReplay` rebuilds the session the episode
header records (an adopted Slicer scene rebuilt from its `scene_adopted` record) and executes every handler
call again, in order, with the clinician's undos rewound where they happened and withheld handlers withheld;
for each call it says whether its outcome, error code, state, result and image hashes match, and whether each
stored artifact still has the recorded hash. `replay` stops at the first difference; the timeline keeps going
and saves the scene after every call.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from copilot.engine.png import LEGACY_PNG_ENCODER, png_encoder
from copilot.engine.volume.render import check_renderer
from copilot.kinds import viewer_kind
from copilot.runtime import new_session
from copilot.session import Session
from copilot.tools.withheld import WITHHELD_EVENT, WithheldRegistry
from copilot.trace.chain import TraceChainError, read_trace
from copilot.trace.recorder import canonical_json
from copilot.trace.redact import redact
from copilot.trace.study_ref import with_study

UNDO_EVENT = "clinician_undo"  # the clinician took back the last change (the desktop's Undo)
TRUNCATED = ("the trace is truncated: it ends without its episode_end event (the session stopped before closing "
             "it, e.g. on a full disk); what it holds reproduced, but it is not a complete record")
ADOPTED_EVENT = "scene_adopted"  # a clinician's own Slicer scene (`copilot.slicer_backend.adopt` records it)


@dataclass
class ReplayReport:
    ok: bool
    events: int
    calls: int
    divergence: str | None = None
    seq: int | None = None
    exports: int = 0  # calls that wrote an object outside the viewer: checked, not written again

    def summary(self) -> str:
        if self.ok:
            checked = f" ({self.exports} exports checked, not written again)" if self.exports else ""
            return f"replay ok: {self.events} events, {self.calls} handler calls reproduced{checked}"
        return f"replay FAILED at event {self.seq}: {self.divergence}"


class ReplaySetupError(ValueError):
    """A verified trace whose session cannot be rebuilt here (no study folder, a viewer, encoder or renderer this
    machine lacks, an adopted scene's voxels modified); `events` counts the trace's events."""

    def __init__(self, message: str, events: int) -> None:
        super().__init__(message)
        self.events = events


@dataclass
class ReplayedCall:
    """One recorded handler call executed again: `problem` is None when it reproduced what the trace holds."""

    event: dict[str, Any]
    problem: str | None
    export: bool = False  # checked, not written again
    images: list[str] = field(default_factory=list)  # sha256 of the images the replay produced


def read_events(trace_dir: Path) -> tuple[list[dict[str, Any]], ReplayReport | None]:
    """The verified events, or those before the first fault and a failing report naming it."""
    try:
        return read_trace(trace_dir), None
    except TraceChainError as exc:
        return exc.events, ReplayReport(False, exc.seq, 0, exc.reason, exc.seq)


class TraceReplay:
    """A verified trace and a fresh session built like the recorded one; `calls()` re-executes its handler calls.

    Raises `TraceChainError` for a trace that does not verify and `ReplaySetupError` for a session that cannot be
    rebuilt. `case_dir` replaces the recorded study folder (a moved case); `case` builds the case object the
    session carries from the header and the folder (the desktop's study)."""

    def __init__(
        self,
        trace_dir: str | Path,
        case_dir: str | Path | None = None,
        case: Callable[[dict[str, Any], Path], Any] | None = None,
    ) -> None:
        self.dir = Path(trace_dir)
        self.events = read_trace(self.dir)
        head = with_study(self.dir, self.events[0])  # a clinician's study: its path and inputs from the sidecar
        if case_dir is None and not head.get("case_root"):
            raise ReplaySetupError("the trace names its study by reference only and its folder holds no "
                                   "study.json: give the study folder (--case)", len(self.events))  # fmt: skip
        self.root = Path(case_dir) if case_dir is not None else Path(head["case_root"])
        self.header = head = removed_series(head, self.root, len(self.events))
        self.case = case(head, self.root) if case is not None else None
        try:
            adopted = next((e for e in self.events if e["type"] == ADOPTED_EVENT), None)
            viewer = None
            if adopted is not None:  # a clinician's own Slicer scene, rebuilt on a fresh one
                from copilot.slicer_backend.adopt import replay_viewer

                viewer = replay_viewer(adopted, self.dir)
            self.session = session_for(head, self.root, case=self.case, viewer=viewer)
        except ValueError as exc:
            raise ReplaySetupError(f"cannot rebuild the session: {exc}", len(self.events)) from exc

    @property
    def truncated(self) -> bool:
        """Whether the trace ends without its `episode_end` event (never a complete record; see `TRUNCATED`)."""
        return self.events[-1]["type"] != "episode_end"

    @property
    def final(self) -> dict[str, Any]:
        """The `episode_end` event (the final answer and status), empty when the trace has none."""
        return next((e for e in reversed(self.events) if e["type"] == "episode_end"), {})

    def calls(self) -> Iterator[ReplayedCall]:
        """Execute the recorded calls again, one per step; the session holds the scene after the call yielded."""
        rewinds = Rewinds(self.session, self.events)
        for ev in self.events[1:]:
            if apply_note(self.session, ev) or rewinds.apply(ev) or ev["type"] != "handler_call":
                continue
            done = self._again(ev)
            rewinds.after_call(ev["seq"])
            yield done

    def _again(self, ev: dict[str, Any]) -> ReplayedCall:
        recorded = [im["sha256"] for im in ev.get("images", [])]
        if is_export(self.session, ev["handler"]):
            return ReplayedCall(ev, _check_export(self.session, ev), True, recorded)
        if not ev["ok"] and ev["error"]["code"] == "cancelled":  # stopped mid-way and rolled back: nothing to redo
            return ReplayedCall(ev, None)
        if not ev["ok"] and ev.get("args_truncated"):  # refused and recorded only by size and hash: nothing to redo
            return ReplayedCall(ev, None)
        out = self.session.call(ev["handler"], ev.get("args"), actor="replay")
        loose = bool(self.header.get("deidentified"))  # what the export removed matches what the replay has there
        return ReplayedCall(ev, _check_call(self.dir, out, ev, loose), images=[im.sha256 for im in out.images])


def removed_series(head: dict[str, Any], root: Path, events: int) -> dict[str, Any]:
    """A de-identified trace's header with the series its export removed found again in the study folder given
    (`--case`): the one image series there (ReplaySetupError when there are several or none)."""
    inputs = dict(head.get("case_inputs") or {})
    if not head.get("deidentified") or inputs.get("series_uid") not in REMOVED_MARKS:
        return head
    import pydicom

    folder = root / str((inputs.get("volumes") or ["."])[0])
    found: set[str] = set()
    for n, path in enumerate(sorted(p for p in folder.rglob("*") if p.is_file())):
        if n >= 5000:
            break
        try:
            ds = pydicom.dcmread(path, stop_before_pixels=True, specific_tags=["SeriesInstanceUID", "Modality"])
        except Exception:  # not a DICOM file
            continue
        uid = str(ds.get("SeriesInstanceUID", "") or "")
        if uid and str(ds.get("Modality", "") or "") not in ("SEG", "SR", "KO", "PR"):  # derived results are no series
            found.add(uid)
    if len(found) != 1:
        raise ReplaySetupError(f"the de-identified trace does not say which series it opened and the study folder "
                               f"holds {len(found)} image series: give the folder of that series alone (--case)",
                               events)  # fmt: skip
    return {**head, "case_inputs": {**inputs, "series_uid": found.pop()}}


def replay(trace_dir: str | Path, case_dir: str | Path | None = None) -> ReplayReport:
    """Verify the chain, then re-execute every handler call and compare what it produces (stops at the first
    difference)."""
    try:
        run = TraceReplay(trace_dir, case_dir)
    except TraceChainError as exc:
        return ReplayReport(False, exc.seq, 0, exc.reason, exc.seq)
    except ReplaySetupError as exc:
        return ReplayReport(False, exc.events, 0, str(exc), 0)
    calls = exports = 0
    for done in run.calls():
        calls += 1
        exports += done.export
        if done.problem:
            ev = done.event
            return ReplayReport(False, len(run.events), calls, f"event {ev['seq']} ({ev['handler']}): {done.problem}",
                                ev["seq"])  # fmt: skip
    if run.truncated:  # every call reproduced, but the session never closed its trace
        return ReplayReport(False, len(run.events), calls, TRUNCATED, len(run.events))
    return ReplayReport(True, len(run.events), calls, exports=exports)


def apply_note(session: Session, ev: dict[str, Any]) -> bool:
    """Apply an event that changes what the session offers (a host withholding handlers); True if it was one."""
    if ev["type"] != WITHHELD_EVENT:
        return False
    session.registry = WithheldRegistry(session.registry, frozenset(ev["handlers"]))  # type: ignore[assignment]
    return True


class Rewinds:
    """The replayed scene after the recorded calls a clinician's undo goes back to (`UNDO_EVENT`: the scene put back
    as it was after call `to_seq`), so the undo is replayed where it happened; a trace without undo saves nothing."""

    def __init__(self, session: Session, events: list[dict[str, Any]]) -> None:
        self.session = session
        self.needed = {int(e.get("to_seq") or 0) for e in events if e.get("type") == UNDO_EVENT}
        self.states = {0: session.save_state()} if 0 in self.needed else {}

    def after_call(self, seq: int) -> None:
        if int(seq) in self.needed:
            self.states[int(seq)] = self.session.save_state()

    def apply(self, ev: dict[str, Any]) -> bool:
        """Rewind for an undo event (True), or leave any other event (False)."""
        if ev["type"] != UNDO_EVENT:
            return False
        saved = self.states.get(int(ev.get("to_seq") or 0))
        if saved is not None:
            self.session.rewind(saved)
        return True


def is_export(session: Session, handler: str) -> bool:
    """Whether a recorded call wrote an object outside the viewer (checked, never run again by a replay)."""
    return handler in session.registry and session.registry.get(handler).exports


def _check_export(session: Session, ev: dict[str, Any]) -> str | None:
    """An export is not run again: writing it anew would mint new identifiers and store a second copy (in the
    study's PACS too). What it left must be what the replay has reached: an export never changes the viewer."""
    if ev["ok"] and canonical_json(redact(session.snapshot())) != canonical_json(ev["state"]):
        return "viewer state before the export differs from the state it recorded"
    return None


def session_for(head: dict[str, Any], root: Path, case: Any = None, viewer: Any = None) -> Session:
    """A fresh session like the one a trace header records: kind, backend, operation set, track, case inputs, the
    PNG encoder and the slice renderer (a header naming none was written by the legacy ones); an encoder or
    renderer this version lacks is a ValueError naming it. `viewer`: a scene rebuilt from the trace (an adopted
    Slicer scene)."""
    encoder = head.get("png_encoder") or LEGACY_PNG_ENCODER
    png_encoder(encoder)
    backend = head.get("backend", "embedded")
    if viewer is None and backend != "embedded" and backend not in viewer_kind(head["kind"]).backends:
        raise ValueError(f"its calls ran on the {backend!r} viewer (a running application), which a replay here "
                         "cannot open")  # fmt: skip
    renderer = check_renderer(head.get("renderer"))
    return new_session(
        head["kind"], backend=backend, ops=head.get("ops"), track=head.get("track", "A"),
        case=case, case_root=root, case_inputs=head.get("case_inputs"), png_encoder=encoder, viewer=viewer,
        protocol=head.get("protocol"), renderer=renderer,
    )  # fmt: skip


REMOVED_MARKS = ("[redacted]", "[uid]")  # what a de-identified export put where an identifier was


def same_json(replayed: Any, recorded: Any, loose: bool = False) -> bool:
    """Whether a replayed value is the recorded one; `loose` (a de-identified trace): each removal mark of the
    recorded value stands for any text inside its JSON string."""
    a, b = canonical_json(replayed), canonical_json(recorded)
    if a == b or not loose or not any(m in b for m in REMOVED_MARKS):
        return a == b
    pattern = re.escape(b)
    for mark in REMOVED_MARKS:
        pattern = pattern.replace(re.escape(mark), r'(?:[^"\\]|\\.)*?')
    return re.fullmatch(pattern, a, re.DOTALL) is not None


def _check_call(tdir: Path, out: Any, ev: dict[str, Any], loose: bool = False) -> str | None:
    """What differs between a call's replayed outcome and the recorded event (None: nothing)."""
    if out.ok != ev["ok"]:
        return f"recorded ok={ev['ok']} but replay gave ok={out.ok} ({out.error})"
    if not out.ok:
        assert out.error is not None
        if out.error["code"] != ev["error"]["code"]:
            return f"error code {out.error['code']!r} differs from recorded {ev['error']['code']!r}"
        return None
    if not same_json(redact(out.state), ev["state"], loose):  # recorded as redacted
        return "viewer state differs from the recorded snapshot"
    if not same_json(redact(out.result), ev["result"], loose):
        return "result differs from the recorded result"
    recorded = ev.get("images", [])
    if len(recorded) != len(out.images):
        return f"{len(out.images)} images instead of {len(recorded)}"
    for rec, im in zip(recorded, out.images, strict=True):
        if im.sha256 != rec["sha256"]:
            return f"image of view {rec['view']} differs (sha256 {im.sha256[:12]} vs {rec['sha256'][:12]})"
        art = tdir / rec["artifact"]
        if not art.is_file() or hashlib.sha256(art.read_bytes()).hexdigest() != rec["sha256"]:
            return f"artifact {rec['artifact']} is missing or was modified"
    return None
