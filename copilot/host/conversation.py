"""A clinician's conversation with the agent about the study open in a host (Qt-free view-model).

Each question is one run of the chat agent on the same session: a `copilot.agent.loop.ChatAgent` made afresh
with the earlier questions and answers in its task, or one agent kept for the whole conversation when it
carries the conversation itself (`follow_ups`, the question given as its `instructions`). In
approve-each-action mode every action the agent proposes waits for the clinician (an action that writes outside
the session — an export, a PACS store — always does, showing what it would write and where): Approve runs it, Reject
(with a reason) answers the model with the reason and runs nothing, Stop ends the turn. Decisions and
questions are recorded in the session's trace. Handler calls go through `on_host`, which runs them on the
host's main thread (Slicer's scene and QuPath's objects belong to it); the model requests run in a worker
thread, so the host never blocks.
"""

from __future__ import annotations

import base64
import functools
import html
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from copilot.cases.pack import CasePack
from copilot.engine.volume.render import encode_png
from copilot.kinds import viewer_kind
from copilot.panel.answer_evidence import answer_evidence, evidence_label
from copilot.panel.model import cited_views
from copilot.privatefs import write_private
from copilot.session import Session
from copilot.tools.writes import WritePlan, rejected, settle
from copilot.trace.outcome import CallOutcome

DECISION_EVENT, QUESTION_EVENT = "clinician_decision", "clinician_question"


class TurnStopped(Exception):
    """The clinician stopped the turn."""


@dataclass
class Action:
    """One handler call of the conversation, as the actions list shows it."""

    handler: str
    args: dict[str, Any]
    actor: str
    status: str  # pending | ok | refused | rejected | stopped
    reason: str = ""
    error: str | None = None
    write: WritePlan | None = None  # what a call of the second kind would write outside the session, and where


@dataclass
class Turn:
    question: str
    answer: str = ""
    status: str = "running"  # running | done | budget_exhausted | stopped | error
    evidence: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None  # the model's tokens and cost for this question


def scrubbed(
    make: Callable[[], Any], facts: Callable[[], Any], service: Callable[[], str] | None = None,
    note: Callable[[str, dict[str, Any]], None] | None = None,
) -> Callable[[], Any]:  # fmt: skip
    """An agent factory whose agents remove the patient banner's identifiers (every spelling) from each request:
    a host knows the patient from its banner, not from the study's files. With `service` (the URL requests go
    to), no agent is made before the clinician opted in to it (`copilot.panel.optin`: OptInNeeded otherwise), and
    to a service off this machine every image goes read by OCR first, what is blanked traced through `note`."""
    from copilot.panel import ocr, optin
    from copilot.panel.identifiers import facts_identifiers
    from copilot.panel.redactor import Redactor

    def build() -> Any:
        url = service() if service is not None else None
        if url is not None:
            optin.ensure(url, tuple(optin.KINDS), None)  # asked on the host's own thread, before the turn
        agent = make()
        identifiers = facts_identifiers(facts())
        if hasattr(agent, "scrub"):  # the banner's identifiers, and every UID and absolute path of this machine
            redactor = Redactor(identifiers, paths=True)
            if url is not None and not optin.is_local(url) and ocr.available():
                redactor.images = ocr.ImageGuard(redactor.found_in, note).data_url
            agent.scrub = redactor.scrub
        return agent

    return build


def direct(fn: Callable[[], Any]) -> Any:
    """Run a host call in the calling thread (slicer-core's standalone scene has no main loop)."""
    return fn()


class _Gate:
    """The session as the agent sees it: every agent action waits for the clinician in approve mode."""

    def __init__(self, conversation: HostConversation) -> None:
        self._c = conversation

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c.session, name)

    def call(self, name: str, args: dict[str, Any] | None = None, actor: str = "agent", **kw: Any) -> CallOutcome:
        c = self._c
        if c.stop_event.is_set():
            raise TurnStopped
        writes = actor != "clinician" and c.session.writes(name)
        plan = c.on_host(lambda: c.session.plan_write(name, args, actor)) if writes else None
        allowed = None
        if (actor == "agent" and c.approve_each) or plan is not None:  # a write outside the session always asks
            decision, reason = c.await_decision(name, args or {}, plan)
            c.session.note(
                DECISION_EVENT, {"handler": name, "args": args or {}, "decision": decision, "reason": reason,
                                 **({"write": plan.to_json()} if plan else {})}
            )  # fmt: skip
            allowed = settle(c.session, plan, args, actor, decision)  # a declined write is traced as such
            if decision == "stop":
                raise TurnStopped
            if decision == "reject":
                return rejected(name, reason)
        return c.on_host(lambda: c.session.call(name, args, actor=actor, consent=allowed, **kw))


class HostConversation:
    """Questions, the agent's proposals and answers, and the evidence they cite, on one host session."""

    def __init__(
        self,
        session: Session,
        study: CasePack,
        agent: Callable[[], Any],
        budget: int = 12,
        on_host: Callable[[Callable[[], Any]], Any] = direct,
        cites: Callable[[str, str], list[dict[str, Any]]] = answer_evidence,
    ) -> None:
        """`cites(answer, kind)` reads the evidence an answer cites (by default the EVIDENCE block's RAS and key
        slices, or a slide answer's localizations)."""
        self.session, self.study, self.agent, self.budget, self.on_host = session, study, agent, budget, on_host
        self.cites = cites
        self.turns: list[Turn] = []
        self.actions: list[Action] = []
        self.approve_each = True
        self.pending: Action | None = None
        self.stop_event = threading.Event()
        self.listeners: list[Callable[[str], None]] = []
        self._decision: tuple[str, str] | None = None
        self._decided = threading.Condition()
        self._thread: threading.Thread | None = None
        self._agent: Any = None  # kept between questions when it carries the conversation itself (`follow_ups`)
        self.service_url: Callable[[], str] | None = None  # where requests go (a panel asks for the opt-in first)
        session.subscribe(self._on_call)

    # ----- what the panel shows -----
    @property
    def messages(self) -> list[tuple[str, str]]:
        """The history: (who, text) pairs."""
        out: list[tuple[str, str]] = []
        for t in self.turns:
            out.append(("clinician", t.question))
            if t.answer or t.status != "running":
                out.append(("agent", t.answer or f"({t.status})"))
        return out

    @property
    def answer_items(self) -> list[dict[str, Any]]:
        """Evidence the answers cite, every turn's."""
        return [ev for t in self.turns for ev in t.evidence]

    @property
    def evidence(self) -> list[dict[str, Any]]:
        """Recorded evidence, then what the answers cite."""
        return self.session.evidence() + self.answer_items

    def evidence_labels(self) -> list[str]:
        return [evidence_label(ev) for ev in self.evidence]

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _notify(self, what: str) -> None:
        for fn in list(self.listeners):
            fn(what)

    def _on_call(self, outcome: CallOutcome, args: dict[str, Any] | None, actor: str) -> None:
        status = "ok" if outcome.ok else "refused"
        err = None if outcome.ok else (outcome.error or {}).get("message")
        if self.pending is not None and self.pending.handler == outcome.name and actor == "agent":
            entry, self.pending = self.pending, None
            entry.status, entry.error = status, err
        else:
            self.actions.append(Action(outcome.name, dict(args or {}), actor, status, error=err))
        self._notify("actions")

    # ----- a turn -----
    def ask(self, question: str) -> Turn:
        """Start one turn in a worker thread; returns it (its answer arrives later)."""
        question = question.strip()
        if not question:
            raise ValueError("ask a question first")
        if self.busy:
            raise RuntimeError("the agent is still answering the last question")
        self.stop_event.clear()
        turn = Turn(question)
        self.turns.append(turn)
        self.session.note(QUESTION_EVENT, {"turn": len(self.turns), "question": question})
        self._notify("messages")
        self._thread = threading.Thread(target=self._worker, args=(turn,), daemon=True, name="copilot-conversation")
        self._thread.start()
        return turn

    def _prompt_case(self, turn: Turn) -> CasePack:
        earlier = [t for t in self.turns if t is not turn]
        history = "\n".join(f"Clinician asked: {t.question}\nYou answered: {t.answer}" for t in earlier if t.answer)
        prompt = {**self.study.prompt, "question": turn.question, "history": history or "(first question)"}
        return CasePack(self.study.root, self.study.case_id, self.study.module, {}, prompt, self.study.kind)

    def _worker(self, turn: Turn) -> None:
        try:
            agent = self._agent if getattr(self._agent, "follow_ups", False) else self.agent()
            self._agent = agent
            if getattr(agent, "follow_ups", False):  # an agent that keeps the conversation: the question is its turn
                agent.instructions = turn.question
            if hasattr(agent, "cancel"):
                agent.cancel = self.stop_event  # Stop ends an in-flight model request at once
            result = agent.run(_Gate(self), self._prompt_case(turn), self.budget)
            turn.answer, turn.status, turn.usage = result.response, result.status, result.usage
            if result.error:
                turn.answer = turn.answer or result.error
            k = self.turns.index(turn) + 1
            turn.evidence = [
                {**ev, "label": f"Q{k} {ev['label']}", "turn": k} for ev in self.cites(turn.answer, self.session.kind)
            ]
        except TurnStopped:
            turn.status = "stopped"
        except Exception as exc:  # shown in the panel, never a crash of the host
            turn.answer, turn.status = f"{type(exc).__name__}: {exc}", "error"
        finally:
            self.pending = None
            self.on_host(self.session.snapshot)  # evidence shown in the host is brought up to date
            self._notify("answer")

    def wait(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.busy

    # ----- approvals -----
    def await_decision(self, name: str, args: dict[str, Any], write: WritePlan | None = None) -> tuple[str, str]:
        """Wait for the clinician's decision on a proposed call (with what it would write, and where)."""
        entry = Action(name, dict(args), "agent", "pending", write=write)
        with self._decided:
            self.pending, self._decision = entry, None
            self.actions.append(entry)
            self._notify("pending")
            while self._decision is None and not self.stop_event.is_set():
                self._decided.wait(0.05)
            decision, reason = ("stop", "") if self.stop_event.is_set() else (self._decision or ("stop", ""))
        if decision != "approve":
            entry.status, entry.reason = ("rejected" if decision == "reject" else "stopped"), reason
            self.pending = None
            self._notify("actions")
        return decision, reason

    def _decide(self, decision: str, reason: str = "") -> None:
        with self._decided:
            self._decision = (decision, reason)
            self._decided.notify_all()

    def approve(self) -> None:
        self._decide("approve")

    def reject(self, reason: str = "") -> None:
        self._decide("reject", reason.strip())

    def stop(self) -> None:
        self.stop_event.set()
        with self._decided:
            self._decided.notify_all()

    # ----- the clinician's own moves and the report -----
    def go_to(self, index: int) -> CallOutcome:
        """Move the views to an evidence item (an audited call by the clinician)."""
        ev = self.evidence[index]
        if viewer_kind(self.session.kind).slide_coordinates:
            point = ev.get("point") or {"x": ev["center"][0], "y": ev["center"][1]}
            name, args = "center_on_wsi_coordinate", {"x": point["x"], "y": point["y"]}
        elif "ras" in ev or isinstance(ev.get("a"), dict):
            name, args = "jump", {"ras": ev.get("ras") or ev["a"]["ras"], "view": "red", "size": 64}
        elif ev.get("kind") == "key_slice":
            name, args = "set_slice_offset", {"view": ev["view"], "offset": ev["offset_mm"], "size": 64}
        else:
            name, args = "set_slice_offset", {"view": ev["view"], "offset": ev["view_state"]["offset"], "size": 64}
        return self.on_host(lambda: self.session.call(name, args, actor="clinician"))

    def export_report(self, path: str | Path) -> Path:
        """HTML report: each question and answer, the decisions, and every evidence item with the views it cites
        (rendered without moving the clinician's views)."""
        parts = ["<!doctype html><html><head><meta charset='utf-8'><title>MedCopilot evidence report</title>"
                 "</head><body><h1>MedCopilot evidence report</h1>"]  # fmt: skip
        for n, t in enumerate(self.turns):
            parts.append(f"<h2>Question {n + 1}</h2><p>{html.escape(t.question)}</p>")
            parts.append(f"<h3>Answer ({html.escape(t.status)})</h3><pre>{html.escape(t.answer)}</pre>")
        parts.append("<h2>Actions</h2><ol>")
        for a in self.actions:
            why = f" — {html.escape(a.reason)}" if a.reason else ""
            parts.append(f"<li>[{html.escape(a.actor)}] {html.escape(a.handler)}: {html.escape(a.status)}{why}</li>")
        parts.append("</ol><h2>Evidence</h2>")
        for n, ev in enumerate(self.evidence):
            parts.append(f"<h3>{n + 1}. {html.escape(evidence_label(ev))}</h3>")
            request = cited_views(ev, self.session.kind)
            views = self.on_host(functools.partial(self.session.peek, request))
            for view, image in (views or {}).items():
                data = base64.b64encode(encode_png(image)).decode()
                parts.append(f'<img alt="{html.escape(view)}" src="data:image/png;base64,{data}" width="256">')
        if self.session.trace_dir is not None:
            parts.append(f"<p>Trace: {html.escape(str(self.session.trace_dir))}</p>")
        parts.append("</body></html>")
        out = Path(path)
        write_private(out, "".join(parts))  # owner-only, whatever the umask
        return out
