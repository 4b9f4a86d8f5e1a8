"""The handlers a host session offers: the kind's registry without the handlers that would replace or close
what the clinician has open, plus host-only handlers (e.g. listing QuPath's own annotations)."""

from __future__ import annotations

from copilot.session import Session
from copilot.tools.registry import Handlers
from copilot.tools.withheld import WITHHELD_EVENT, WithheldRegistry

# never offered on a clinician's own study: they would clear, replace or close it
HIDDEN = {"radiology": frozenset({"open_case"}), "pathology": frozenset({"load_case", "load_image", "close"})}

HostRegistry = WithheldRegistry


def withhold(session: Session, hidden: frozenset[str], extra: tuple[Handlers, ...] = ()) -> None:
    """Offer the session's registry less `hidden` (plus `extra`), and say so in its trace (replay withholds the
    same handlers)."""
    session.registry = WithheldRegistry(session.registry, hidden, extra)
    session.note(WITHHELD_EVENT, {"handlers": sorted(hidden)})
