"""The copilot panel's view-model (Qt-free): chat, timeline of handler calls, evidence list, budget meter,
approve-each-action mode, stop, and the evidence report. Widgets (PySide6 here, Slicer's `qt` in the
Slicer module) only bind to it.

The agent runs in a worker thread against an `ApprovalGate` in front of the session: in approve mode a
proposed agent call waits until the clinician approves or rejects it, and a call that writes outside the session
(an export, a PACS store) always does, showing what it would write and where; stop makes the next call end the
episode. The viewer the clinician sees is the session's viewer: one scene, one state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.cases.pack import CasePack
from copilot.kinds import viewer_kind
from copilot.panel.answer_evidence import answer_evidence, focus_point
from copilot.panel.identifiers import removal_notice
from copilot.panel.restated import same_place, unrestated
from copilot.panel.screen import blank_views, jump_plan
from copilot.panel.stream import chain_stream
from copilot.panel.undo import UndoHistory, UndoStep
from copilot.panel.usage import add_usage
from copilot.session import Peek, Session
from copilot.tools.writes import WritePlan, rejected, settle
from copilot.trace.outcome import CallOutcome
from copilot.trace.recorder import TraceWriteError


class EpisodeStopped(Exception):
    """The clinician stopped the episode."""


@dataclass
class TimelineEntry:
    handler: str
    args: dict[str, Any]
    actor: str
    status: str  # pending | ok | refused | rejected
    error: str | None = None
    thumbnail: bytes | None = None
    write: WritePlan | None = None  # what a call of the second kind would write outside the session, and where


class ApprovalGate:
    """The session as the agent sees it: calls may wait for approval; a stop ends the episode."""

    def __init__(self, session: Session, model: PanelModel) -> None:
        self._session = session
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def note(self, kind: str, payload: dict[str, Any]) -> Any:
        """A trace event of the agent's; a model turn that asks for calls is one round of the question."""
        if kind == "model_turn":
            self._model.count_turn(payload)
        return self._session.note(kind, payload)

    def call(self, name: str, args: dict[str, Any] | None = None, actor: str = "agent", **kw: Any) -> CallOutcome:
        m = self._model
        if m.stop_event.is_set():
            raise EpisodeStopped
        plan = self._session.plan_write(name, args, actor) if actor != "clinician" else None
        allowed = None
        if (actor == "agent" and m.approve_mode) or plan is not None:  # a write outside the session always asks
            decision, reason = m.await_approval(name, args or {}, plan)
            proposal = {"handler": name, "args": dict(args or {}), **({"write": plan.to_json()} if plan else {})}
            allowed = settle(self._session, plan, args, actor, decision)  # a declined write is traced as such
            if decision == "stop":
                self._session.note("clinician_stop", {"during": "approval", **proposal})
                raise EpisodeStopped
            if decision == "reject":
                self._session.note("clinician_rejection", {**proposal, "reason": reason or "no reason given"})
                return rejected(name, reason)
            self._session.note("clinician_approval", proposal)
        return self._session.call(name, args, actor=actor, consent=allowed, **kw)


class PanelModel:
    """State and actions of the copilot panel."""

    def __init__(self, session: Session, case: CasePack | Any = None, budget: int = 20) -> None:
        """`case` defaults to the session's own case (a study opened in the workstation is one too)."""
        case = case if case is not None else session.case
        if case is None:
            raise ValueError("the panel needs a session opened on a case")
        self.session, self.case, self.budget = session, case, budget
        self.timeline: list[TimelineEntry] = []
        self.messages: list[tuple[str, str]] = []  # (who, text)
        self.status = "idle"  # idle | running | done | stopped | error | budget_exhausted
        self.usage: dict[str, Any] | None = None  # the last question's tokens and cost (a model policy's)
        self.approve_mode = False
        self.pending: TimelineEntry | None = None
        self.stop_event = threading.Event()
        self._decision: str | None = None
        self._reason = ""
        self.policy: Any = None  # the policy of the last run; a conversation continues with the next question
        self.policy_label = ""  # the name the clinician chose it by
        self._decided = threading.Condition()
        self._thread: threading.Thread | None = None
        self.listeners: list[Callable[[str], None]] = []
        self.crosshair: list[float] | None = None  # RAS of the linked cursor shown in every slice view
        self.answer_items: list[dict[str, Any]] = []  # evidence stated in the final answer
        self._recorded: list[dict[str, Any]] = session.evidence()  # as of the last call, for reads during a run
        self.selected: int | None = None  # the evidence item last jumped to
        self.streamed = ""  # the model's text of the round in progress, as it arrives
        self.stream_pieces = 0  # how many pieces of it came so far
        self._stream_lock = threading.Lock()
        self._question_from = 0  # where the timeline of the current question begins (rounds count per question)
        self._turns: int | None = None  # the model's turns with calls this question (None: a policy without turns)
        self._turns_before = 0  # such turns of the earlier questions
        self.last_answer_items: list[dict[str, Any]] = []  # what the last answer states, each place once
        self.session_usage: dict[str, Any] | None = None  # tokens and cost of every question so far
        self.answered: list[tuple[str, str]] = []  # (question, answer) of each question answered, for a Store
        self.answer_from: list[int] = []  # per answered question: the last evidence number before it began
        self._evidence_from = 0
        self._question = ""
        session.subscribe(self._on_call)
        self.history = UndoHistory(session)  # the agent's and the clinician's changes, undone most recent first

    def usage_text(self) -> str:
        """Tokens and cost of this question (live while it runs) and of the whole session ("" offline)."""
        from copilot.llm.prices import usage_words

        live = self.policy.usage_summary() if self.status == "running" and hasattr(self.policy, "usage_summary") \
            else self.usage  # fmt: skip
        if not live:
            return ""
        text = f"this question: {usage_words(live)}"
        whole = add_usage(self.session_usage, live) if self.status == "running" else self.session_usage
        return text + (f" · session: {usage_words(whole)}" if whole and whole != live else "")

    # ----- notifications -----
    def _notify(self, what: str) -> None:
        for fn in list(self.listeners):
            fn(what)

    def _on_call(self, outcome: CallOutcome, args: dict[str, Any] | None, actor: str) -> None:
        if outcome.ok and outcome.state:
            self._recorded = list(outcome.state.get("evidence") or [])
        thumb = None  # the agent's first image; the clinician's own moves are on screen already
        if actor != "clinician" and outcome.images and outcome.images[0].mime in ("image/png", "image/jpeg"):
            thumb = outcome.images[0].data
        status = "ok" if outcome.ok else "refused"
        err = None if outcome.ok else (outcome.error or {}).get("message")
        if self.pending is not None and self.pending.handler == outcome.name and actor == "agent":
            entry, self.pending = self.pending, None
            entry.status, entry.error, entry.thumbnail = status, err, thumb
        else:
            self.timeline.append(TimelineEntry(outcome.name, dict(args or {}), actor, status, err, thumb))
        if actor == "agent":  # the round's text ended in calls: it stays in the chat, the next round streams anew
            with self._stream_lock:
                said, self.streamed = self.streamed.strip(), ""
            if said:
                self.messages.append(("agent", said))
        self._notify("timeline")

    def _on_stream(self, piece: str) -> None:
        """A piece of the model's text as it arrives (the worker's thread): shown by the panel at once."""
        with self._stream_lock:
            self.streamed += piece
            self.stream_pieces += 1
        self._notify("stream")

    # ----- derived state -----
    def count_turn(self, payload: dict[str, Any]) -> None:
        """A model turn of the running question: one round when it asks for calls, however many."""
        calls = payload.get("tool_calls_total", len(payload.get("tool_calls") or []))
        self._turns = (self._turns or 0) + (1 if isinstance(calls, int) and calls > 0 else 0)

    @property
    def rounds_used(self) -> int:
        """The current question's rounds (the budget is per question): the model's turns that asked for calls, a
        turn with several calls being one; for a policy without model turns, its calls."""
        if self._turns is not None:
            return self._turns
        return sum(1 for e in self.timeline[self._question_from :] if e.actor == "agent" and e.status != "pending")

    @property
    def rounds_total(self) -> int:
        """The rounds of every question of the session."""
        if self._turns is not None or self._turns_before:
            return self._turns_before + (self._turns or 0)
        return sum(1 for e in self.timeline if e.actor == "agent" and e.status != "pending")

    @property
    def evidence(self) -> list[dict[str, Any]]:
        """Recorded evidence, then what the final answer states (key slices, RAS point, slide points). While a run
        is in progress, the evidence as of its last call: the GUI thread never waits for the session's lock."""
        recorded = self._recorded if self.status == "running" else self.session.evidence()
        return list(recorded) + unrestated(self.answer_items, recorded)  # a restated record is listed once

    # ----- the episode -----
    def run_episode(self, policy: Any, instruction: str = "") -> None:
        """Start the policy in a worker thread (the GUI never blocks); a model policy gets the clinician's
        instruction with its task."""
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("an episode is already running")
        self.stop_event.clear()
        self.status = "running"
        self._question_from = len(self.timeline)
        self._turns_before += self._turns or 0
        self._turns = None
        self._evidence_from = max((int(e.get("evidence_id") or 0) for e in self.session.evidence()), default=0)
        with self._stream_lock:
            self.streamed, self.stream_pieces = "", 0
        if hasattr(policy, "on_stream"):
            chain_stream(policy, lambda piece: self._on_stream(piece))  # shown as it arrives
        name = getattr(policy, "name", "policy")
        if policy is not self.policy:
            self.messages.append(("clinician", f"Run {name} on {self.case.case_id}"))
        self.policy = policy
        try:
            self.session.note("clinician_instruction", {"text": instruction, "policy": name})
        except TraceWriteError as exc:  # the trace cannot be written: the session stopped, and the panel says why
            self.messages.append(("system", f"{type(exc).__name__}: {exc}"))
            self.status = "error"
            self._notify("status")
            return
        self._question = instruction
        if instruction:
            self.messages.append(("clinician", instruction))
            notice = removal_notice(policy, instruction)
            if notice:  # the clinician sees which of their words never leave the machine
                self.messages.append(("system", notice))
            if hasattr(policy, "instructions"):
                policy.instructions = instruction
        if hasattr(policy, "cancel"):
            policy.cancel = self.stop_event  # Stop ends an in-flight model request, not only the next call
        self._notify("status")
        self._thread = threading.Thread(target=self._worker, args=(policy,), daemon=True, name="copilot-agent")
        self._thread.start()

    def _worker(self, policy: Any) -> None:
        try:
            result = policy.run(ApprovalGate(self.session, self), self.case, self.budget)
            if result.status == "error":
                self.messages.append(("system", result.error or "the model service failed"))
            elif result.status == "stopped":
                self.messages.append(("system", "stopped by the clinician"))
            else:
                self.messages.append(("agent", result.response))
                self.answered.append((self._question, str(result.response or "")))
                self.answer_from.append(self._evidence_from)
                self.take_answer(result.response)
            if result.usage is not None:  # a model's tokens and cost for this question, shown by the panel
                self.usage = dict(result.usage)
                self.session_usage = add_usage(self.session_usage, self.usage)
            self.status = result.status
        except EpisodeStopped:
            self.status = "stopped"
        except Exception as exc:  # shown in the panel, never a crash of the GUI
            self.messages.append(("system", f"{type(exc).__name__}: {exc}"))
            self.status = "error"
        finally:
            self.pending = None
            with self._stream_lock:
                self.streamed = ""
            self._notify("status")

    def take_answer(self, text: str) -> None:
        """Evidence from the final answer joins the list, and the views go to the answered point. In a conversation
        the evidence of every answer stays listed (an item stated again is listed once)."""
        items = answer_evidence(text, self.session.kind)
        self.session.note("answer_evidence", {"items": items})
        self.last_answer_items = unrestated(items)
        kept = self.answer_items if getattr(self.policy, "follow_ups", False) else []
        self.answer_items = kept + unrestated(items, kept)
        focus = focus_point(items)
        listed = self.evidence
        at = next((n for n, e in enumerate(listed) if e is focus or same_place(focus, e)), None) if focus else None
        if at is not None:
            self.jump_to_evidence(at, actor="system")
        for view in blank_views(self.session):  # never leave a view past the anatomy: back to its middle
            span = self.act("get_slice_offset_range", {"view": view}, actor="system")
            if span.ok:
                middle = round((span.result["min"] + span.result["max"]) / 2.0, 6)
                self.act("set_slice_offset", {"view": view, "offset": middle, "size": 64}, actor="system")
        self._notify("evidence")

    def wait(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
        return self._thread is None or not self._thread.is_alive()

    # ----- approve mode and stop -----
    def set_approve_mode(self, on: bool) -> None:
        self.approve_mode = on
        self._notify("status")

    def await_approval(self, name: str, args: dict[str, Any], write: WritePlan | None = None) -> tuple[str, str]:
        """Wait for the clinician's decision on a proposed call (with what it would write outside the session, and
        where): (approve | reject | stop, reason)."""
        entry = TimelineEntry(name, dict(args), "agent", "pending", write=write)
        with self._decided:
            self.pending, self._decision, self._reason = entry, None, ""
            self.timeline.append(entry)
            self._notify("timeline")
            while self._decision is None and not self.stop_event.is_set():
                self._decided.wait(0.05)
            decision = "stop" if self.stop_event.is_set() else self._decision
            reason = self._reason
        if decision != "approve":
            entry.status = "rejected" if decision == "reject" else "stopped"
            entry.error = reason or None
            self.pending = None
            self._notify("timeline")
        return decision or "stop", reason

    def approve(self) -> None:
        with self._decided:
            self._decision = "approve"
            self._decided.notify_all()

    def reject(self, reason: str = "") -> None:
        """Reject the pending proposal; the model is told so, with the reason."""
        with self._decided:
            self._decision, self._reason = "reject", reason.strip()
            self._decided.notify_all()

    def stop(self) -> None:
        if not self.stop_event.is_set() and self.status == "running" and self.pending is None:
            self.session.note("clinician_stop", {"during": "run"})
        self.stop_event.set()
        with self._decided:
            self._decided.notify_all()

    # ----- undo -----
    def undo(self, actor: str | None = None) -> UndoStep:
        """Take back the last change (the last of `actor` when given: it and every later change): the scene and
        evidence put back through the session's rewind, traced. Refused while the agent runs."""
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("the agent is running: stop it before undoing")
        target = self.history.last(actor)
        if target is None:
            raise IndexError(f"nothing of the {actor} to undo" if actor else "nothing to undo")
        while True:
            step = self.history.undo()
            self.timeline.append(TimelineEntry("undo", {"undone": step.title()}, "clinician", "ok"))
            if step is target:
                break
        self._recorded = self.session.evidence()
        self._notify("undo")
        return step

    # ----- clinician actions (audited like the agent's) -----
    def act(self, name: str, args: dict[str, Any], actor: str = "clinician") -> CallOutcome:
        """The one way the panel changes the scene: an audited handler call."""
        return self.session.call(name, args, actor=actor)

    def scroll(self, view: str, slices: int) -> CallOutcome:
        return self.act(
            "scroll",
            {
                "view": view,
                "direction": "up" if slices > 0 else "down",
                "num_slices": abs(slices),
                "output": "final",
                "size": 64,
            },
        )

    def jump(self, ras: list[float], actor: str = "clinician") -> CallOutcome:
        """Linked cursor: every slice view through a RAS point; the planes move without shifting the picture
        when the point is in view, else the views centre on it."""
        how, offsets = jump_plan(self.session, ras)
        if how == "jump":
            out = self.act("jump", {"ras": ras, "view": "red", "size": 64}, actor)
        else:
            out = CallOutcome("jump", True, 200)
            for view, offset in offsets.items():
                out = self.act("set_slice_offset", {"view": view, "offset": offset, "size": 64}, actor)
                if not out.ok:
                    break
        if out.ok:
            self.crosshair = list(ras)
            self._notify("crosshair")
        return out

    def window_level(self, window: float, level: float) -> CallOutcome:
        return self.act("wl", {"window": window, "level": level, "view": "red", "size": 64})

    def jump_to_evidence(self, index: int, actor: str = "clinician") -> CallOutcome:
        """Move every view to an evidence item: its RAS point, its key slice, or its slide coordinates."""
        ev = self.evidence[index]
        self.selected = index
        if "ras" in ev:
            out = self.jump(ev["ras"], actor)
        elif isinstance(ev.get("a"), dict) and "ras" in ev["a"]:  # a distance: its first end
            out = self.jump(ev["a"]["ras"], actor)
        elif ev.get("kind") == "key_slice":
            out = self.act("set_slice_offset", {"view": ev["view"], "offset": ev["offset_mm"], "size": 64}, actor)
        elif ev.get("kind") == "bookmark":
            out = self.act("set_slice_offset", {"view": ev["view"], "offset": ev["view_state"]["offset"], "size": 64},
                           actor)  # fmt: skip
        else:
            point = ev.get("point") or {"x": ev["center"][0], "y": ev["center"][1]}
            out = self.act("center_on_wsi_coordinate", {"x": point["x"], "y": point["y"]}, actor)
        self._notify("evidence")
        return out

    # ----- report -----
    def export_report(self, path: str | Path) -> Path:
        """The session's audit page (conversation, every call with its arguments, result and images, the evidence
        drawn on the views), as `medcopilot` writes it per episode; identifiers in it are marked."""
        from copilot.panel.report import write_session_report

        return write_session_report(self, path)


def cited_views(ev: dict[str, Any], kind: str) -> Peek:
    """The render an evidence item cites: its RAS point in all views, its key slice in its view, its slide point."""
    if viewer_kind(kind).slide_coordinates:
        point = ev.get("point") or {"x": ev["center"][0], "y": ev["center"][1]}
        return Peek(wsi_point=(float(point["x"]), float(point["y"])))
    if "ras" in ev:
        return Peek(("red", "yellow", "green"), (256, 256), ras=tuple(ev["ras"]))
    if ev.get("kind") == "key_slice":
        return Peek((ev["view"],), (256, 256), offset=float(ev["offset_mm"]))
    views = (ev["view"],) if ev.get("kind") == "bookmark" else ("red", "yellow", "green")
    return Peek(views, (256, 256))
