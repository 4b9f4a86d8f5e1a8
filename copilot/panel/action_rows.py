"""The Actions list's rows (Qt-free): every call of the agent on a row of its own; the clinician's (and the
system's) repeated steps — a wheel scroll's twenty `scroll` calls, a drag's `wl` calls — folded into one row, so
that the agent's actions never scroll away under the clinician's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ActionRow:
    """One row: the timeline entries it stands for (several only for a folded run of the same step)."""

    first: int  # index of its first entry in the timeline
    entries: tuple[Any, ...]

    @property
    def entry(self) -> Any:
        """The row's last entry (its status is the run's latest)."""
        return self.entries[-1]

    def key(self) -> tuple[Any, ...]:
        """What the row was made from: a row whose key is unchanged is drawn as it is."""
        e = self.entry
        return (id(self.entries[0]), len(self.entries), e.status, e.error, e.thumbnail is not None)

    def text(self) -> str:
        e = self.entry
        said = f"undo {e.args.get('undone', '')}" if e.handler == "undo" else e.handler
        times = f" ×{len(self.entries)}" if len(self.entries) > 1 else ""
        last = self.first + len(self.entries)
        number = f"{last}." if len(self.entries) == 1 else f"{self.first + 1}–{last}."
        return f"{number} [{e.actor}] {said}{times} — {e.status}" + (f": {e.error}" if e.error else "")


def _folds(row: list[Any], entry: Any) -> bool:
    """`entry` continues the run of `row`: the same step of the same actor (never the agent's), both done."""
    last = row[-1]
    return entry.actor != "agent" and entry.actor == last.actor and entry.handler == last.handler and \
        entry.handler != "undo" and entry.status == last.status == "ok"  # fmt: skip


def action_rows(timeline: list[Any]) -> list[ActionRow]:
    """The rows of `timeline` in order, runs of the clinician's same step folded."""
    rows: list[tuple[int, list[Any]]] = []
    for n, entry in enumerate(timeline):
        if rows and _folds(rows[-1][1], entry):
            rows[-1][1].append(entry)
        else:
            rows.append((n, [entry]))
    return [ActionRow(first, tuple(entries)) for first, entries in rows]
