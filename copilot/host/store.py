"""The Store of a host's panel (Slicer, QuPath; Qt-free): the clinician's Store of `copilot.panel.store` on a
`HostConversation` — its last answered question, the evidence its answers cite, its session. The Store button
runs on the host's main thread (where its scene lives); the widget only shows the plan and passes the decision."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from copilot.host.conversation import HostConversation
from copilot.panel.store import StorePlan, outcome_words, store_with
from copilot.trace.outcome import CallOutcome


class HostStoreView:
    """What the Store reads and changes of a host conversation (as the desktop's panel model offers it)."""

    def __init__(self, conversation: HostConversation) -> None:
        self.conversation = conversation
        self.session = conversation.session

    @property
    def answered(self) -> list[tuple[str, str]]:
        return [(t.question, t.answer) for t in self.conversation.turns if t.status == "done" and t.answer]

    @property
    def answer_items(self) -> list[dict[str, Any]]:
        return self.conversation.answer_items

    @answer_items.setter
    def answer_items(self, kept: list[dict[str, Any]]) -> None:
        for turn in self.conversation.turns:  # items taken into the session leave their answer's list
            turn.evidence = [ev for ev in turn.evidence if ev in kept]

    def act(self, name: str, args: dict[str, Any]) -> CallOutcome:
        return self.session.call(name, args, actor="clinician")


def host_store(conversation: HostConversation, confirm: Callable[[StorePlan], tuple[str, str]]) -> list[str]:
    """The panel's Store button: plan, `confirm(plan)` shows it and answers (approve | reject | stop, reason), then
    write exactly that or nothing; the lines to show after. Refused while the agent works."""
    if conversation.busy:
        return ["the copilot is working: wait for its answer (or stop it) before storing"]
    plan, outcomes = store_with(HostStoreView(conversation), confirm)
    if not plan.steps:
        return ["nothing to store: " + "; ".join(plan.problems)]
    return [outcome_words(o) for o in outcomes] or ["nothing was stored"]
