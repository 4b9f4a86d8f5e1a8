"""Trace replay for the workstation (Qt-free): a timeline of a trace's handler calls that can be scrubbed.

Opening a trace verifies its hash chain and re-executes every call on a fresh session, exactly as
`medcopilot replay` does, keeping the scene state after each call. Moving the scrubber to call k
restores the state after call k (so every view shows the scene as it was then) and reports whether
the images that call produced hash to what the trace recorded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.engine.volume.render import encode_png
from copilot.panel.studies import Study
from copilot.replay import Rewinds, apply_note, is_export, read_events, session_for
from copilot.session import Peek, SessionState
from copilot.tools.args import DEFAULT_SIZE
from copilot.trace.recorder import canonical_json
from copilot.trace.study_ref import with_study


@dataclass
class ReplayStep:
    """One recorded handler call and what replaying it gave."""

    seq: int
    handler: str
    actor: str
    args: dict[str, Any]
    ok: bool
    recorded_hashes: list[str]
    replayed_hashes: list[str]
    artifacts: list[Path]
    state_matches: bool
    scene: SessionState | None = None  # the viewer state and evidence after the call

    @property
    def matches(self) -> bool:
        return self.state_matches and self.recorded_hashes == self.replayed_hashes

    @property
    def title(self) -> str:
        mark = "" if self.matches else "  ≠ recorded"
        return f"{self.seq}. [{self.actor}] {self.handler}{'' if self.ok else ' (refused)'}{mark}"


class TraceTimeline:
    """A verified trace, replayed once; `seek(k)` shows the scene after call k.

    The timeline's session is built like the recorded one (kind, backend, operation set, track); seeking
    rewinds it to the state saved after a call. It is used from one thread (the GUI's); no agent runs on it.
    """

    def __init__(self, trace_dir: str | Path, case_dir: str | Path | None = None) -> None:
        self.dir = Path(trace_dir)
        events, failure = read_events(self.dir)
        if failure is not None:
            raise ValueError(failure.summary())
        head = with_study(self.dir, events[0])  # the study's path and inputs from the owner-only sidecar
        if case_dir is None and not head.get("case_root"):
            raise ValueError(f"{self.dir} names its study by reference only (no study.json beside the trace)")
        root = Path(case_dir) if case_dir is not None else Path(head["case_root"])
        self.header = head
        self.study = Study(root, str(head.get("case_id", root.name)), str(head.get("module", "")), head["kind"],
                           dict(head.get("case_inputs") or {}))  # fmt: skip
        self.session = session_for(head, root, case=self.study)
        self.steps: list[ReplayStep] = []
        self.final: dict[str, Any] = next((e for e in reversed(events) if e["type"] == "episode_end"), {})
        rewinds = Rewinds(self.session, events)  # a clinician's undo is replayed where it happened
        for ev in events[1:]:
            if not apply_note(self.session, ev) and not rewinds.apply(ev) and ev["type"] == "handler_call":
                self.steps.append(self._replay(ev))
                rewinds.after_call(ev["seq"])
        self.position = len(self.steps) - 1

    def _replay(self, ev: dict[str, Any]) -> ReplayStep:
        recorded = [im["sha256"] for im in ev.get("images", [])]
        if is_export(self.session, ev["handler"]):  # not written again (new identifiers, a second PACS copy)
            ok, state, replayed = bool(ev["ok"]), self.session.snapshot(), recorded
        else:
            out = self.session.call(ev["handler"], ev.get("args"), actor="replay")
            ok, state, replayed = out.ok, out.state, [im.sha256 for im in out.images]
        same_state = ok == ev["ok"] and (not ok or canonical_json(state) == canonical_json(ev["state"]))
        return ReplayStep(
            ev["seq"], ev["handler"], ev.get("actor", ""), dict(ev.get("args") or {}), bool(ev["ok"]), recorded,
            replayed, [self.dir / im["artifact"] for im in ev.get("images", [])], same_state,
            self.session.save_state(),
        )  # fmt: skip

    @property
    def case(self) -> Study:
        return self.study

    @property
    def verified(self) -> bool:
        return all(s.matches for s in self.steps)

    def seek(self, index: int) -> ReplayStep:
        """Put the scene (views, layers, evidence) back as it was after call `index`."""
        if not self.steps:
            raise IndexError("the trace records no handler calls")
        index = max(0, min(int(index), len(self.steps) - 1))
        step = self.steps[index]
        if step.scene is not None:
            self.session.rewind(step.scene)
        self.position = index
        return step

    def rendered_hashes(self, index: int) -> tuple[list[str], list[str]]:
        """(recorded, re-rendered) sha256 of call `index`'s view images, the views rendered again from the
        restored scene at the recorded size: equal when the views show exactly what the agent saw."""
        step = self.seek(index)
        size = int(step.args.get("size", DEFAULT_SIZE))
        last = {art.stem.split("_", 2)[-1]: h for h, art in zip(step.recorded_hashes, step.artifacts, strict=True)}
        if step.handler == "scroll" and step.args.get("output") == "cine":
            last = {}
        views = tuple(v for v in last if v in ("red", "yellow", "green", "viewer"))
        if not views:
            return [], []
        images = self.session.peek(Peek(views, (size, size))) or {}
        encoder = self.session.png_encoder
        again = [hashlib.sha256(encode_png(images[v], encoder)).hexdigest() for v in views if v in images]
        return [last[v] for v in views if v in images], again
