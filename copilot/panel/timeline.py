"""Trace replay for the workstation (Qt-free): a timeline of a trace's handler calls that can be scrubbed.

Opening a trace verifies its hash chain and re-executes every call on a fresh session through the same
`TraceReplay` as `medcopilot replay`, keeping the scene state after each call. Moving the scrubber to call k
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
from copilot.replay import ReplayedCall, TraceReplay
from copilot.session import Peek, SessionState
from copilot.tools.args import DEFAULT_SIZE


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
    state_matches: bool  # outcome, state, result and artifacts as recorded
    scene: SessionState | None = None  # the viewer state and evidence after the call
    problem: str | None = None  # what differs from the trace, in `medcopilot replay`'s words

    @property
    def matches(self) -> bool:
        return self.state_matches and self.recorded_hashes == self.replayed_hashes

    @property
    def title(self) -> str:
        mark = "" if self.matches else "  ≠ recorded"
        return f"{self.seq}. [{self.actor}] {self.handler}{'' if self.ok else ' (refused)'}{mark}"


class TraceTimeline:
    """A verified trace, replayed once by `copilot.replay.TraceReplay`; `seek(k)` shows the scene after call k.

    The timeline's session is the replay's (kind, backend, operation set, track, an adopted Slicer scene rebuilt);
    seeking rewinds it to the state saved after a call. It is used from one thread (the GUI's); no agent runs on
    it. A trace that does not verify raises its `TraceChainError`, a session that cannot be rebuilt
    `ReplaySetupError`, with the words `medcopilot replay` reports.
    """

    def __init__(self, trace_dir: str | Path, case_dir: str | Path | None = None) -> None:
        run = TraceReplay(trace_dir, case_dir, case=_study)
        self.dir, self.header, self.session = run.dir, run.header, run.session
        assert isinstance(run.case, Study)
        self.study: Study = run.case
        self.final: dict[str, Any] = run.final
        self.truncated = run.truncated  # no episode_end: what it holds replays, but it is not a complete record
        self.steps = [self._step(done) for done in run.calls()]
        self.position = len(self.steps) - 1

    def _step(self, done: ReplayedCall) -> ReplayStep:
        """The step of a call just replayed, with the scene it left."""
        ev = done.event
        recorded = [im["sha256"] for im in ev.get("images", [])]
        return ReplayStep(
            ev["seq"], ev["handler"], ev.get("actor", ""), dict(ev.get("args") or {}), bool(ev["ok"]), recorded,
            done.images, [self.dir / im["artifact"] for im in ev.get("images", [])], done.problem is None,
            self.session.save_state(), done.problem,
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


def _study(head: dict[str, Any], root: Path) -> Study:
    """The study a replayed trace shows on the desktop, from its header and folder."""
    return Study(root, str(head.get("case_id", root.name)), str(head.get("module", "")), head["kind"],
                 dict(head.get("case_inputs") or {}))  # fmt: skip
