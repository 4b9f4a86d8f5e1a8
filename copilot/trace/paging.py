"""A trace read a page at a time (`GET /trace?after=SEQ&limit=N`): at most `limit` events and about
`max_bytes` of them per answer, read line by line from the file, so a long trace never sits in memory whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from copilot.errors import HandlerError

PAGE_EVENTS = 500  # events per page unless `limit` says fewer
MAX_PAGE_EVENTS = 5000
PAGE_BYTES = 4 * 1024 * 1024  # a page stops once its events reach this size (it always holds one)


def page_params(query: dict[str, list[str]]) -> tuple[int, int]:
    """`after` (the last sequence number already read, -1: from the start) and `limit` of a trace request."""
    def number(name: str, default: int, low: int, high: int) -> int:
        raw = (query.get(name) or [str(default)])[-1]
        try:
            value = int(raw)
        except ValueError:
            raise HandlerError("invalid_query", f"{name} must be an integer, not {raw[:40]!r}", status=400) from None
        if not low <= value <= high:
            raise HandlerError("invalid_query", f"{name} must be {low} to {high}", status=400)
        return value

    return number("after", -1, -1, 1 << 62), number("limit", PAGE_EVENTS, 1, MAX_PAGE_EVENTS)


def read_page(path: Path | None, after: int = -1, limit: int = PAGE_EVENTS, max_bytes: int = PAGE_BYTES) -> dict[
    str, Any
]:  # fmt: skip
    """Events with sequence numbers after `after`, oldest first: `events`, `next_after` (pass it as `after` for
    the next page) and `more`. Event `seq` is its line number, so earlier lines are skipped unparsed; a last line
    still being written (no newline yet) is left for the next page."""
    events: list[dict[str, Any]] = []
    size, more = 0, False
    if path is not None and path.is_file():
        with path.open("r", encoding="utf-8", newline="\n") as fh:
            for seq, line in enumerate(fh):
                if seq <= after:
                    continue
                if not line.endswith("\n"):
                    break
                if len(events) >= limit or (events and size + len(line) > max_bytes):
                    more = True
                    break
                events.append(json.loads(line))
                size += len(line)
    next_after = events[-1]["seq"] if events else after
    return {"events": events, "next_after": next_after, "more": more}
