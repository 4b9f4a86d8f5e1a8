"""What may leave the machine: the removal of a study's identifiers (copilot.panel.identifiers) from every request
to the model, and the one-line disclosure shown before the first request to a model service that is not on
this machine.

Every text of a request is scrubbed of the identifiers just before it is sent; the words the runtime burns into an
image are the view's name, offsets, window/level and the series or slide name, and a study whose series name holds
an identifier is refused before anything is sent. Images going off this machine are read by OCR first
(`copilot.panel.ocr`) and the words spelling an identifier blanked.
"""

from __future__ import annotations

from typing import Any

from copilot.kinds import viewer_kind
from copilot.panel.identifiers import study_identifiers
from copilot.panel.optin import is_local
from copilot.panel.redactor import REDACTED, Redactor, identifier_pattern

__all__ = ["REDACTED", "PrivacyError", "Redactor", "check_images", "disclosure", "identifier_pattern", "is_local",
           "study_identifiers"]  # fmt: skip


class PrivacyError(RuntimeError):
    """The study cannot be sent without an identifier (e.g. burnt into the images by its series name)."""


def burnt_in_names(session: Any) -> list[str]:
    """The free text a rendered image of the session carries: series names (radiology) or the slide's name."""
    state = session.snapshot()
    if viewer_kind(session.kind).slide_coordinates:
        return [str(state.get("image") or "")]
    return [str(v.get("name") or "") for v in state.get("volumes", [])]


def check_images(session: Any, redactor: Redactor) -> None:
    """Refuse (PrivacyError) when an identifier would be burnt into the images by a series or slide name; from
    now on what the OCR guard blanks or withholds is traced in the session (`image_text_blanked`, `image_withheld`)."""
    guard = getattr(redactor, "image_guard", None)
    if guard is not None:
        guard.on_event = session.note
    for name in burnt_in_names(session):
        if redactor.found_in(name):
            raise PrivacyError(
                f"the {viewer_kind(session.kind).image_name} name shown on every image holds a patient "
                "identifier; rename the file or series before asking the model"
            )


def disclosure(base_url: str | None, kind: str) -> str:
    """The one line said before the first request to a service that is not on this machine."""
    where = base_url or "https://api.openai.com/v1"
    what = viewer_kind(kind).shared_data
    return (
        f"The model service at {where} is not on this machine: your questions, {what} will be sent there; "
        "patient identifiers, UIDs and dates are removed first."
    )
