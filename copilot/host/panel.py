"""What a host's copilot panel shows, as plain values (Qt-free), and the queue that runs handler calls on the
host's main thread. A host's widgets only copy a `PanelState` into themselves and forward clicks."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from copilot.host.conversation import Action, HostConversation
from copilot.panel.store import nothing_to_store


@dataclass(frozen=True)
class PanelState:
    """Every text, list and switch of the panel."""

    status: str
    inventory: str
    history: str
    actions: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    pending: str = ""
    can_ask: bool = True
    can_decide: bool = False
    can_stop: bool = False
    trace: str = ""
    errors: list[str] = field(default_factory=list)
    banner: str = ""  # whose study it is: for the clinician, never sent to the model
    can_store: bool = False  # the Store button: a session whose study can export, the agent not working
    store_note: str = ""  # why the study has nothing to store ('' when it can export)


def action_line(n: int, a: Action) -> str:
    """One line of the actions list."""
    why = f" — {a.reason}" if a.reason else ""
    err = f" — {a.error}" if a.error and a.status == "refused" else ""
    return f"{n}. [{a.actor}] {a.handler}: {a.status}{why}{err}"


def proposal_text(a: Any) -> str:
    """A pending proposal (an `Action` or a panel's timeline entry) as the clinician sees it; a write outside the
    session says what and where."""
    text = f"Proposed: {a.handler} {a.args}"
    return text + (f"\nWrites outside the session:\n{a.write.text()}" if a.write is not None else "")


def panel_state(conversation: HostConversation | None, inventory: list[str] | None = None,
                trace: str = "", errors: list[str] | None = None, banner: str = "") -> PanelState:  # fmt: skip
    """The panel for a conversation (None: no session yet); `banner`: the patient banner's line."""
    if conversation is None:
        return PanelState("No copilot session: load a study in the viewer, then start the copilot.", "", "",
                          can_ask=False)  # fmt: skip
    c = conversation
    busy = c.busy
    pending = c.pending if c.pending is not None and c.pending.status == "pending" else None
    last = c.turns[-1].status if c.turns else "ready"
    status = "waiting for your decision" if pending else ("working…" if busy else last)
    usage = c.turns[-1].usage if c.turns and not busy else None
    if usage:  # the last question's tokens and cost (tokens only where no price is known)
        from copilot.llm.prices import usage_words

        status += f" · tokens: {usage_words(usage)}"
    note = nothing_to_store(c.session)
    history = "\n\n".join(f"{'You' if who == 'clinician' else 'Copilot'}: {text}" for who, text in c.messages)
    return PanelState(
        status=status,
        inventory="; ".join(inventory or []),
        history=history,
        actions=[action_line(n + 1, a) for n, a in enumerate(c.actions)],
        evidence=c.evidence_labels(),
        pending=proposal_text(pending) if pending else "",
        can_ask=not busy,
        can_decide=pending is not None,
        can_stop=busy,
        trace=trace,
        errors=list(errors or []),
        banner=banner,
        can_store=not busy and not note,
        store_note=note,
    )


class MainThreadCalls:
    """Handler calls made from the agent's worker thread, run by the host's main thread when it `pump`s (e.g.
    from a Qt timer): Slicer's scene and QuPath's GUI objects belong to their main thread."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Callable[[], Any], dict[str, Any], threading.Event]] = queue.Queue()
        self._main = threading.get_ident()

    def __call__(self, fn: Callable[[], Any]) -> Any:
        if threading.get_ident() == self._main:
            return fn()
        box: dict[str, Any] = {}
        done = threading.Event()
        self._queue.put((fn, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def pump(self, limit: int = 50) -> int:
        """Run waiting calls (at most `limit`); returns how many ran."""
        n = 0
        while n < limit:
            try:
                fn, box, done = self._queue.get_nowait()
            except queue.Empty:
                break
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed to the waiting thread
                box["error"] = exc
            finally:
                done.set()
            n += 1
        return n
