"""Server text made safe to show: escape sequences (CSI, OSC, DCS…) and control characters removed, so that
a PACS cannot clear a terminal, retitle a window, write the clipboard or reorder text with bidi controls."""

from __future__ import annotations

import re
from typing import Any

# ESC/CSI/OSC/DCS/APC/PM/SOS sequences (7-bit and 8-bit introducers), then every remaining C0/C1 control and
# the invisible format characters that reorder or hide text
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")


def printable(value: Any, max_chars: int = 256) -> str:
    """`value` as one line of plain text: sequences and controls removed, at most `max_chars` characters."""
    text = _CONTROLS.sub("", _SEQUENCES.sub("", str(value)))
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def printable_or_none(value: Any, max_chars: int = 256) -> str | None:
    """`printable` for a value that may be absent."""
    return None if value is None else printable(value, max_chars)
