"""What may leave the machine: the removal of a study's identifiers (copilot.panel.identifiers) from every request
to the model, and the one-line disclosure shown before the first request to a model service that is not on
this machine.

Every text of a request is scrubbed of the identifiers just before it is sent; images never carry them
because the only words burnt into an image are the view's name, offsets, window/level and the series or slide
name, and a study whose series or slide name holds an identifier is refused before anything is sent.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlparse

from copilot.kinds import viewer_kind
from copilot.panel.identifiers import MIN_LENGTH, study_identifiers
from copilot.panel.spellings import flexible

__all__ = ["PrivacyError", "Redactor", "check_images", "disclosure", "is_local", "study_identifiers"]

REDACTED = "[redacted]"


class PrivacyError(RuntimeError):
    """The study cannot be sent without an identifier (e.g. burnt into the images by its series name)."""


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


def burnt_in_names(session: Any) -> list[str]:
    """The free text a rendered image of the session carries: series names (radiology) or the slide's name."""
    state = session.snapshot()
    if viewer_kind(session.kind).slide_coordinates:
        return [str(state.get("image") or "")]
    return [str(v.get("name") or "") for v in state.get("volumes", [])]


def check_images(session: Any, redactor: Redactor) -> None:
    """Refuse (PrivacyError) when an identifier would be burnt into the images by a series or slide name."""
    for name in burnt_in_names(session):
        if redactor.found_in(name):
            raise PrivacyError(
                f"the {viewer_kind(session.kind).image_name} name shown on every image holds a patient "
                "identifier; rename the file or series before asking the model"
            )


def is_local(base_url: str | None) -> bool:
    """Whether a model service URL is on this machine (loopback)."""
    host = urlparse(base_url or "https://api.openai.com/v1").hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def disclosure(base_url: str | None, kind: str) -> str:
    """The one line said before the first request to a service that is not on this machine."""
    where = base_url or "https://api.openai.com/v1"
    what = viewer_kind(kind).shared_data
    return (
        f"The model service at {where} is not on this machine: your questions, {what} will be sent there; "
        "patient identifiers, UIDs and dates are removed first."
    )
