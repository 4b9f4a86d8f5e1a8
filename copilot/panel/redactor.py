"""Removing a study's identifiers from what is sent to a model: any JSON-like value's strings scrubbed of every
identifier in the spellings a clinician may type (`copilot.panel.spellings`), compared on folded text
(`copilot.panel.folding`: case, accents, full-width forms, invisible characters and look-alike letters of other
scripts do not matter) with separators ignored, and every DICOM UID (of the study or of an object just stored)
replaced; image data URLs kept as they are, or passed to `images` (the OCR guard of `copilot.panel.ocr` for a
service off this machine).
Used by study conversations (identifiers from the study's files) and host panels (from the patient banner)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from copilot.panel.folding import fold, fold_with_map
from copilot.panel.identifiers import MIN_LENGTH
from copilot.panel.spellings import flexible
from copilot.tools.study_text import without_paths, without_uids

REDACTED = "[redacted]"
_BEFORE, _AFTER = r"(?<![^\W_])", r"(?![^\W_])"  # whole words: not inside a longer word or number ('doe' in 'does')


def _is_path(value: str) -> bool:
    """A folder or file path is matched as it is written (its words alone, '/data', are ordinary words)."""
    return value.startswith(("/", "~", "\\")) or value[1:3] in (":\\", ":/")


def identifier_pattern(identifiers: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern over folded text of whole identifiers, each with its separators ignored (`flexible`); the
    alternatives grouped by their first character, longest first, so that a text is read in one pass."""
    folded = {f for i in identifiers if i and (f := fold(i).strip())}
    bodies = {(re.escape(f) if _is_path(f) else flexible(f)): len(f) for f in folded if any(c.isalnum() for c in f)}
    if not bodies:
        return None
    groups: dict[str, list[str]] = {}
    for body in sorted(bodies, key=lambda b: (-bodies[b], b)):
        groups.setdefault(body[:1] if body[:1] != "\\" else body[:2], []).append(body)
    body = "|".join(f"(?:{'|'.join(g)})" for g in groups.values())
    return re.compile(rf"{_BEFORE}(?:{body}){_AFTER}")


class Redactor:
    """Removes a study's identifiers from any JSON-like value (strings are scrubbed; image data URLs are kept)."""

    def __init__(self, identifiers: Iterable[str], uids: bool = True, paths: bool = False) -> None:
        self.uids = uids  # every DICOM UID replaced too, of whatever object (`[uid]`)
        self.paths = paths  # every absolute path of this machine replaced too (what goes to a model)
        self.identifiers = sorted({i for i in identifiers if len(i) >= MIN_LENGTH}, key=len, reverse=True)
        self._pattern = identifier_pattern(self.identifiers)
        self.images: Callable[[str], str] | None = None  # what an image data URL becomes (burnt-in text blanked)
        self.image_guard: Any = None  # the OCR guard behind `images`, when one is set

    def _spans(self, value: str) -> list[tuple[int, int]]:
        """Where identifiers occur in a text (indices of the text as given)."""
        if self._pattern is None:
            return []
        folded, where = fold_with_map(value)
        spans: list[tuple[int, int]] = []
        for m in self._pattern.finditer(folded):
            if m.end() > m.start():
                start, end = where[m.start()], where[m.end() - 1] + 1
                while end < len(value) and fold(value[end]) == "":  # marks and invisible characters after it
                    end += 1
                spans.append((start, end))
        return spans

    def text(self, value: str) -> str:
        if value.startswith("data:image/"):
            return self.images(value) if self.images is not None else value
        if self.uids:
            value = without_uids(value)
        if self.paths:
            value = without_paths(value)
        if self._pattern is None:
            return value
        spans = self._spans(value)
        if not spans:
            return value
        out, last = [], 0
        for start, end in spans:
            out += [value[last:start], REDACTED]
            last = end
        out.append(value[last:])
        return "".join(out)

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
        """The identifiers that occur in a text, as written there."""
        return sorted({value[start:end] for start, end in self._spans(value)})
