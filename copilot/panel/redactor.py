"""Removing a study's identifiers from what is sent to a model: any JSON-like value's strings scrubbed of every
identifier in the spellings a clinician may type (`copilot.panel.spellings`); image data URLs kept as they are.
Used by study conversations (identifiers from the study's files) and host panels (from the patient banner)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from copilot.panel.identifiers import MIN_LENGTH
from copilot.panel.spellings import flexible

REDACTED = "[redacted]"


def identifier_pattern(identifiers: Iterable[str]) -> re.Pattern[str] | None:
    """A case-insensitive pattern of whole identifiers (not inside a longer word or number: 'DOE' in 'does'),
    each also with other spacing, commas and date separators (`copilot.panel.spellings.flexible`)."""
    alternatives = sorted({i for i in identifiers if i}, key=len, reverse=True)
    if not alternatives:
        return None
    body = "|".join(flexible(i) for i in alternatives)
    return re.compile(rf"(?<![A-Za-z0-9])(?:{body})(?![A-Za-z0-9])", re.IGNORECASE)


class Redactor:
    """Removes a study's identifiers from any JSON-like value (strings are scrubbed; image data URLs are kept)."""

    def __init__(self, identifiers: Iterable[str]) -> None:
        self.identifiers = sorted({i for i in identifiers if len(i) >= MIN_LENGTH}, key=len, reverse=True)
        self._pattern = identifier_pattern(self.identifiers)

    def text(self, value: str) -> str:
        if self._pattern is None or value.startswith("data:image/"):
            return value
        return self._pattern.sub(REDACTED, value)

    def scrub(self, value: Any) -> Any:
        """A copy of `value` with every identifier replaced by `[redacted]`."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value

    def found_in(self, value: str) -> list[str]:
        """The identifiers that occur in a text (case-insensitive)."""
        if self._pattern is None:
            return []
        return sorted({m.group(0) for m in self._pattern.finditer(value)})
