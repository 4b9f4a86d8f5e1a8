"""Verifying and replaying a trace against a fresh viewer.

First the file itself: every line must be canonical JSON, carry its own correct hash and the
hash of the line before it. Then every handler call is executed again on a new session built
from the episode header; its outcome, state snapshot, result and image hashes must match, and
each stored artifact must still have the recorded hash.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.engine.png import LEGACY_PNG_ENCODER, png_encoder
from copilot.engine.volume.render import check_renderer
from copilot.kinds import viewer_kind
from copilot.runtime import new_session
from copilot.session import Session
from copilot.tools.withheld import WITHHELD_EVENT, WithheldRegistry
from copilot.trace.recorder import GENESIS, TRACE_FILE, canonical_json, event_hash
from copilot.trace.redact import redact
from copilot.trace.study_ref import with_study

UNDO_EVENT = "clinician_undo"  # the clinician took back the last change (the desktop's Undo)


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


def read_events(trace_dir: Path) -> tuple[list[dict[str, Any]], ReplayReport | None]:
    """Parse and verify the hash chain; a failing report names the first bad event."""
    path = trace_dir / TRACE_FILE
    if not path.is_file():
        return [], ReplayReport(False, 0, 0, f"no {TRACE_FILE} in {trace_dir}", 0)
    events: list[dict[str, Any]] = []
    prev = GENESIS
    raw = path.read_bytes()
    for n, line_bytes in enumerate(raw.split(b"\n")):
        if not line_bytes and n == raw.count(b"\n"):
            break
        try:
            line = line_bytes.decode("utf-8")
            event = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return events, ReplayReport(False, n, 0, f"line {n + 1} is not valid JSON", n)
        where = f"event {n} ({event.get('type')} {event.get('handler', '')})".replace(" )", ")")
        if not isinstance(event, dict) or canonical_json(event) != line:
            return events, ReplayReport(False, n, 0, f"{where} is not in canonical form (edited)", n)
        if event.get("seq") != n:
            return events, ReplayReport(False, n, 0, f"{where} has sequence number {event.get('seq')}", n)
        if event.get("hash") != event_hash(event):
            return events, ReplayReport(False, n, 0, f"{where}: content does not match its hash (edited)", n)
        if event.get("prev") != prev:
            return events, ReplayReport(False, n, 0, f"{where}: chain broken (previous event edited or removed)", n)
        prev = hashlib.sha256(line_bytes).hexdigest()
        events.append(event)
    if not events or events[0].get("type") != "episode_start":
        return events, ReplayReport(False, 0, 0, "the trace does not begin with episode_start", 0)
    return events, None


def replay(trace_dir: str | Path, case_dir: str | Path | None = None) -> ReplayReport:
    """Verify the chain, then re-execute every handler call and compare what it produces."""
    tdir = Path(trace_dir)
    events, failure = read_events(tdir)
    if failure is not None:
        return failure
    head = with_study(tdir, events[0])  # a clinician's study: its path and inputs from the owner-only sidecar
    if case_dir is None and not head.get("case_root"):
        return ReplayReport(False, len(events), 0, "the trace names its study by reference only and its folder "
                            "holds no study.json: give the study folder (--case)", 0)  # fmt: skip
    root = Path(case_dir) if case_dir is not None else Path(head["case_root"])
    try:
        adopted = next((e for e in events if e["type"] == "scene_adopted"), None)  # a clinician's own Slicer scene
        viewer = None
        if adopted is not None:
            from copilot.slicer_backend.adopt import replay_viewer

            viewer = replay_viewer(adopted, tdir)
        session = session_for(head, root, viewer=viewer)
    except ValueError as exc:
        return ReplayReport(False, len(events), 0, f"cannot rebuild the session: {exc}", 0)
    calls = exports = 0
    rewinds = Rewinds(session, events)
    for ev in events[1:]:
        if apply_note(session, ev) or rewinds.apply(ev) or ev["type"] != "handler_call":
            continue
        calls += 1
        if is_export(session, ev["handler"]):
            exports += 1
            problem = _check_export(session, ev)
        else:
            problem = _check_call(tdir, session, ev)
        if problem:
            return ReplayReport(False, len(events), calls, f"event {ev['seq']} ({ev['handler']}): {problem}", ev["seq"])
        rewinds.after_call(ev["seq"])
    return ReplayReport(True, len(events), calls, exports=exports)


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


def _check_call(tdir: Path, session: Session, ev: dict[str, Any]) -> str | None:
    if not ev["ok"] and ev["error"]["code"] == "cancelled":  # stopped mid-way and rolled back: nothing to redo
        return None
    if not ev["ok"] and ev.get("args_truncated"):  # refused and recorded only by size and hash: nothing to redo
        return None
    out = session.call(ev["handler"], ev.get("args"), actor="replay")
    if out.ok != ev["ok"]:
        return f"recorded ok={ev['ok']} but replay gave ok={out.ok} ({out.error})"
    if not out.ok:
        assert out.error is not None
        if out.error["code"] != ev["error"]["code"]:
            return f"error code {out.error['code']!r} differs from recorded {ev['error']['code']!r}"
        return None
    if canonical_json(redact(out.state)) != canonical_json(ev["state"]):  # recorded as redacted
        return "viewer state differs from the recorded snapshot"
    if canonical_json(redact(out.result)) != canonical_json(ev["result"]):
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
