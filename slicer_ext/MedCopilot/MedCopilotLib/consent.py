"""The module's opt-in before anything goes to a model service: asked once per copilot session and service.

A question sends the question, the views the agent asks for and the volumes' modality and series (never the patient's
identifiers) to the service of the panel's *Model* fields. Until the user has agreed to that service in this session,
*Ask* shows what would go where and sends nothing on No. Qt-free (the widget shows the text), tested here.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

DEFAULT_SERVICE = "https://api.openai.com/v1"  # where an OpenAI client goes when no base URL is set


def service_url(base_url: str, env: Mapping[str, str]) -> str:
    """Where the requests would go: the panel's base URL, else `OPENAI_BASE_URL`, else OpenAI's API."""
    return (base_url or env.get("OPENAI_BASE_URL", "") or DEFAULT_SERVICE).strip()


def uses_model(policy: str) -> bool:
    """Whether a benchmark run's policy asks a model service (the offline ones do not)."""
    return policy.split(":", 1)[0] not in ("baseline", "prior", "scripted")


def is_local(url: str) -> bool:
    """Whether the service runs on this computer (a loopback address): requests then stay on it."""
    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def opt_in_text(url: str) -> str:
    """What the user agrees to, in words."""
    where = "a model service on this computer" if is_local(url) else "a model service outside this computer"
    return (
        f"Each question you ask sends the question, the views the agent asks to see and the volumes' modality and "
        f"series to {where}: {url}\n\nPatient name, ID, dates, descriptions and UIDs are never sent. "
        "Send questions to this service for this session?"
    )


class OptIn:
    """The services the user agreed to in this copilot session (forgotten when the session ends)."""

    def __init__(self) -> None:
        self._agreed: set[str] = set()

    def needed(self, url: str) -> bool:
        return url not in self._agreed

    def agree(self, url: str) -> None:
        self._agreed.add(url)

    def forget(self) -> None:
        self._agreed.clear()
