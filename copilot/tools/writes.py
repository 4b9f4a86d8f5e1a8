"""Actions of the second kind: handler calls that write outside the session (a PACS store, a file exported).

A handler that writes declares a planner, `(ctx, **args) -> WritePlan`, which says — without writing anything —
exactly what the call would write and where. The session runs such a call only with the clinician's consent for
that very plan (a `WriteConsent`, which a host's gate obtains by showing the plan, whatever its approve mode) or,
headless, when every destination was named with `--allow-store`; otherwise the call is refused by name and
nothing changes. Each attempt is traced as a `write_attempt` event (what, where, decision, by whom).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from copilot.trace.outcome import CallOutcome
from copilot.trace.redact import redact_text

WRITE_EVENT = "write_attempt"
REFUSED = "write_not_approved"


@dataclass(frozen=True)
class WritePlan:
    """What one call would write (`what`, in words) and where: PACS URLs or `file:` URIs (`destinations`)."""

    handler: str
    what: str
    destinations: tuple[str, ...]

    def text(self) -> str:
        """One line for the clinician's dialog: what, then where."""
        return f"{self.what} → {', '.join(self.destinations)}"

    def to_json(self) -> dict[str, Any]:
        return {"handler": self.handler, "what": self.what, "destinations": list(self.destinations)}


@dataclass(frozen=True)
class WriteConsent:
    """The clinician's yes to one plan with its arguments (given by a host's gate; valid for that call only)."""

    plan: WritePlan
    args: str  # the arguments as canonical JSON

    def covers(self, plan: WritePlan, args: dict[str, Any] | None) -> bool:
        return self.plan == plan and self.args == canonical(args)


def canonical(args: dict[str, Any] | None) -> str:
    """Arguments as canonical JSON (what a consent is compared by)."""
    return json.dumps(args or {}, sort_keys=True, default=str)


def consent(plan: WritePlan, args: dict[str, Any] | None) -> WriteConsent:
    """The consent a host's gate passes with the call after the clinician said yes to `plan`."""
    return WriteConsent(plan, canonical(args))


class DeclinedWrites(Protocol):
    """Where a declined write is traced (the session)."""

    def note_declined_write(self, plan: WritePlan, args: dict[str, Any] | None, actor: str, decision: str) -> None: ...


def settle(
    session: DeclinedWrites, plan: WritePlan | None, args: dict[str, Any] | None, actor: str, decision: str
) -> WriteConsent | None:
    """The clinician's answer to a planned write: `approve` gives the consent for exactly that plan; `reject` or
    `stop` traces the declined attempt with its destination. None when there is no plan or no yes."""
    if plan is None:
        return None
    if decision == "approve":
        return consent(plan, args)
    session.note_declined_write(plan, args, actor, "rejected" if decision == "reject" else "stopped")
    return None


def rejected(name: str, reason: str) -> CallOutcome:
    """The outcome the agent sees for a call the clinician rejected (with the reason given, if any)."""
    message = "the clinician rejected this action" + (f": {reason}" if reason else "")
    return CallOutcome(name, False, 403, error={"code": "rejected_by_clinician", "message": message})


def file_destination(path: Path) -> str:
    """A file a call would write, as a destination (`file:` URI of its absolute path)."""
    return Path(path).resolve().as_uri()


def pacs_destination(url: str) -> str:
    """A PACS a call would store to, as a destination (its DICOMweb URL, secrets removed)."""
    return redact_text(str(url).rstrip("/"))


def allowed(destination: str, allow_store: Sequence[str]) -> bool:
    """Whether `--allow-store` names this destination: the same URL or one under it; for files, a folder above it
    (a path or a `file:` URI)."""
    folders = [Path(unquote(urlsplit(e).path)) if e.startswith("file:") else Path(e)
               for e in allow_store if e.startswith("file:") or "://" not in e]  # fmt: skip
    if destination.startswith("file:"):
        target = Path(unquote(urlsplit(destination).path))
        return any(target.is_relative_to(f.expanduser().resolve()) for f in folders)
    bases = [e.rstrip("/") for e in allow_store if "://" in e and not e.startswith("file:")]
    return any(destination == b or destination.startswith(b + "/") for b in bases)


def attempt(plan: WritePlan, args: dict[str, Any] | None, actor: str, decision: str, by: str) -> dict[str, Any]:
    """The `write_attempt` trace event of one call of the second kind: what, where, the decision and by whom."""
    return {**plan.to_json(), "args": args or {}, "actor": actor, "decision": decision, "by": by}


def refusal_message(plan: WritePlan) -> str:
    """Why a write was refused, naming it and what would allow it."""
    return (
        f"{plan.handler} writes outside the session ({plan.text()}); nothing was written: it needs the clinician's "
        f"yes, or in a headless run --allow-store naming {plan.destinations[0] if plan.destinations else 'it'}"
    )
