"""The copilot panel's view-model (Qt-free): chat, timeline of handler calls, evidence list, budget meter,
approve-each-action mode, stop, and the evidence report. Widgets (PySide6 here, Slicer's `qt` in the
Slicer module) only bind to it.

The agent runs in a worker thread against an `ApprovalGate` in front of the session: in approve mode a
proposed agent call waits until the clinician approves or rejects it; stop makes the next call end the
episode. The viewer the clinician sees is the session's viewer: one scene, one state.
"""

from __future__ import annotations

import base64
import html
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.cases.pack import CasePack
from copilot.engine.render import encode_png
from copilot.pacs.store import stored_html
from copilot.panel.answer_evidence import answer_evidence, focus_point
from copilot.panel.screen import blank_views, jump_plan
from copilot.session import Peek, Session
from copilot.trace.outcome import CallOutcome


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


class ApprovalGate:
    """The session as the agent sees it: calls may wait for approval; a stop ends the episode."""

    def __init__(self, session: Session, model: PanelModel) -> None:
        self._session = session
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def call(self, name: str, args: dict[str, Any] | None = None, actor: str = "agent", **kw: Any) -> CallOutcome:
        m = self._model
        if m.stop_event.is_set():
            raise EpisodeStopped
        if actor == "agent" and m.approve_mode:
            decision = m.await_approval(name, args or {})
            if decision == "stop":
                raise EpisodeStopped
            if decision == "reject":
                return CallOutcome(
                    name,
                    False,
                    403,
                    error={"code": "rejected_by_clinician", "message": "the clinician rejected this action"},
                )
        return self._session.call(name, args, actor=actor, **kw)


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
        self.approve_mode = False
        self.pending: TimelineEntry | None = None
        self.stop_event = threading.Event()
        self._decision: str | None = None
        self._decided = threading.Condition()
        self._thread: threading.Thread | None = None
        self.listeners: list[Callable[[str], None]] = []
        self.crosshair: list[float] | None = None  # RAS of the linked cursor shown in every slice view
        self.answer_items: list[dict[str, Any]] = []  # evidence stated in the final answer
        self.selected: int | None = None  # the evidence item last jumped to
        session.subscribe(self._on_call)

    # ----- notifications -----
    def _notify(self, what: str) -> None:
        for fn in list(self.listeners):
            fn(what)

    def _on_call(self, outcome: CallOutcome, args: dict[str, Any] | None, actor: str) -> None:
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
        self._notify("timeline")

    # ----- derived state -----
    @property
    def rounds_used(self) -> int:
        return sum(1 for e in self.timeline if e.actor == "agent" and e.status != "pending")

    @property
    def evidence(self) -> list[dict[str, Any]]:
        """Recorded evidence, then what the final answer states (key slices, RAS point, slide points)."""
        return self.session.evidence() + list(self.answer_items)

    # ----- the episode -----
    def run_episode(self, policy: Any, instruction: str = "") -> None:
        """Start the policy in a worker thread (the GUI never blocks); a model policy gets the clinician's
        instruction with its task."""
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("an episode is already running")
        self.stop_event.clear()
        self.status = "running"
        self.messages.append(("clinician", f"Run {getattr(policy, 'name', 'policy')} on {self.case.case_id}"))
        if instruction:
            self.messages.append(("clinician", instruction))
            if hasattr(policy, "instructions"):
                policy.instructions = instruction
        self._notify("status")
        self._thread = threading.Thread(target=self._worker, args=(policy,), daemon=True, name="copilot-agent")
        self._thread.start()

    def _worker(self, policy: Any) -> None:
        try:
            result = policy.run(ApprovalGate(self.session, self), self.case, self.budget)
            self.messages.append(("agent", result.response))
            self.take_answer(result.response)
            self.status = result.status
        except EpisodeStopped:
            self.status = "stopped"
        except Exception as exc:  # shown in the panel, never a crash of the GUI
            self.messages.append(("system", f"{type(exc).__name__}: {exc}"))
            self.status = "error"
        finally:
            self.pending = None
            self._notify("status")

    def take_answer(self, text: str) -> None:
        """Evidence from the final answer joins the list, and the views go to the answered point."""
        self.answer_items = answer_evidence(text, self.session.kind)
        focus = focus_point(self.answer_items)
        if focus is not None:
            self.jump_to_evidence(self.evidence.index(focus), actor="system")
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

    def await_approval(self, name: str, args: dict[str, Any]) -> str:
        entry = TimelineEntry(name, dict(args), "agent", "pending")
        with self._decided:
            self.pending, self._decision = entry, None
            self.timeline.append(entry)
            self._notify("timeline")
            while self._decision is None and not self.stop_event.is_set():
                self._decided.wait(0.05)
            decision = "stop" if self.stop_event.is_set() else self._decision
        if decision != "approve":
            entry.status = "rejected" if decision == "reject" else "stopped"
            self.pending = None
            self._notify("timeline")
        return decision or "stop"

    def approve(self) -> None:
        with self._decided:
            self._decision = "approve"
            self._decided.notify_all()

    def reject(self) -> None:
        with self._decided:
            self._decision = "reject"
            self._decided.notify_all()

    def stop(self) -> None:
        self.stop_event.set()
        with self._decided:
            self._decided.notify_all()

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
        """HTML evidence report: the final answer, each evidence item and the views it cites (rendered without
        moving the viewer)."""
        parts = [
            f"<!doctype html><html><head><meta charset='utf-8'><title>Evidence report {html.escape(self.case.case_id)}"
            "</title></head><body>",
            f"<h1>Evidence report — {html.escape(self.case.case_id)}</h1>",
        ]
        answer = next((t for who, t in reversed(self.messages) if who == "agent"), "")
        parts.append(f"<h2>Answer</h2><pre>{html.escape(answer)}</pre><h2>Evidence</h2>")
        for n, ev in enumerate(self.session.evidence()):
            parts.append(
                f"<h3>{n + 1}. {html.escape(ev.get('kind', ''))} {html.escape(ev.get('label', ''))}</h3>"
                f"<pre>{html.escape(str({k: v for k, v in ev.items() if k != 'view_state'}))}</pre>"
            )
            for view, image in (self.session.peek(cited_views(ev, self.session.kind)) or {}).items():
                data = base64.b64encode(encode_png(image)).decode()
                parts.append(f'<img alt="{view}" src="data:image/png;base64,{data}" width="256">')
        trace_dir = self.session.trace_dir
        parts.append(stored_html(trace_dir / "derived" if trace_dir is not None else None) + "</body></html>")
        out = Path(path)
        out.write_text("".join(parts), encoding="utf-8")
        return out


def cited_views(ev: dict[str, Any], kind: str) -> Peek:
    """The render an evidence item cites: its RAS point in all views, its key slice in its view, its slide point."""
    if kind == "pathology":
        point = ev.get("point") or {"x": ev["center"][0], "y": ev["center"][1]}
        return Peek(wsi_point=(float(point["x"]), float(point["y"])))
    if "ras" in ev:
        return Peek(("red", "yellow", "green"), (256, 256), ras=tuple(ev["ras"]))
    if ev.get("kind") == "key_slice":
        return Peek((ev["view"],), (256, 256), offset=float(ev["offset_mm"]))
    views = (ev["view"],) if ev.get("kind") == "bookmark" else ("red", "yellow", "green")
    return Peek(views, (256, 256))
