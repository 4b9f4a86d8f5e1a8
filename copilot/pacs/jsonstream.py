"""A DICOM JSON answer (a JSON array of objects) split into its entries as it arrives, without holding the
whole answer: nesting depth and entry size bounded, anything but an array of objects refused by name."""

from __future__ import annotations

import json
import re
from typing import Any

from copilot.pacs.errors import PacsError

_STRING_STOP = re.compile(rb'["\\]')
_STRUCTURE = re.compile(rb'["{}\[\]]')
_SEPARATOR = re.compile(rb"[^ \t\r\n,]")


def _bad(why: str) -> PacsError:
    return PacsError("pacs_bad_answer", f"the PACS answer is not a DICOM JSON list: {why}")


class JsonArrayItems:
    """Feed bytes, get back the complete top-level objects of a JSON array (parsed, each at most `item_bytes`,
    nested at most `max_depth`)."""

    def __init__(self, max_depth: int, item_bytes: int) -> None:
        self.max_depth, self.item_bytes = max_depth, item_bytes
        self.started = self.closed = self.in_string = self.escaped = False
        self.depth = 0
        self._item: list[bytes] = []
        self._size = 0

    def _take(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._size > self.item_bytes:
            raise PacsError("pacs_answer_too_large", f"one entry of the PACS answer exceeds {self.item_bytes} bytes")
        self._item.append(piece)

    def _between(self, data: bytes, i: int) -> tuple[int, Any]:
        """Outside any entry: skip separators; start the array, an entry, or close the array."""
        m = _SEPARATOR.search(data, i)
        if m is None:
            return len(data), None
        j, c = m.start(), data[m.start()]
        if self.closed:
            raise _bad("text after the end of the list")
        if not self.started:
            if c != ord("["):
                raise _bad("it does not start with '['")
            self.started = True
            return j + 1, None
        if c == ord("]"):
            self.closed = True
            return j + 1, None
        if c != ord("{"):
            raise _bad("an entry that is not an object")
        self.depth, self._item, self._size = 1, [], 0
        self._take(b"{")
        return j + 1, None

    def _inside(self, data: bytes, i: int) -> tuple[int, Any]:
        """Within an entry: follow strings and brackets until the entry closes."""
        if self.escaped:
            self._take(data[i : i + 1])
            self.escaped = False
            return i + 1, None
        pattern = _STRING_STOP if self.in_string else _STRUCTURE
        m = pattern.search(data, i)
        if m is None:
            self._take(data[i:])
            return len(data), None
        j, c = m.start(), data[m.start()]
        self._take(data[i : j + 1])
        if self.in_string:
            if c == ord("\\"):
                self.escaped = True
            else:
                self.in_string = False
            return j + 1, None
        if c == ord('"'):
            self.in_string = True
        elif c in (ord("{"), ord("[")):
            self.depth += 1
            if self.depth > self.max_depth:
                raise PacsError("pacs_too_deep", f"the PACS answer nests deeper than {self.max_depth} levels")
        else:
            self.depth -= 1
            if self.depth == 0:
                return j + 1, self._finish_item()
        return j + 1, None

    def _finish_item(self) -> dict[str, Any]:
        try:
            item = json.loads(b"".join(self._item))
        except ValueError as exc:
            raise _bad(f"an entry that is not valid JSON ({exc.__class__.__name__})") from None
        self._item, self._size = [], 0
        if not isinstance(item, dict):
            raise _bad("an entry that is not an object")
        return item

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """The entries completed by this piece of the answer."""
        out: list[dict[str, Any]] = []
        i = 0
        while i < len(data):
            i, item = self._inside(data, i) if self.depth else self._between(data, i)
            if item is not None:
                out.append(item)
        return out

    def finish(self) -> None:
        """The answer ended: it must have been a whole list (an empty answer is an empty list)."""
        if self.started and not self.closed:
            raise PacsError("pacs_truncated", "the PACS answer ended in the middle of the list")
