"""The named refusals of PACS traffic (a handler reports them like any other refusal)."""

from __future__ import annotations

from copilot.errors import HandlerError


class PacsError(HandlerError):
    """The PACS refused (HTTP 4xx: `pacs_refused`), failed (5xx: `pacs_failed`) or could not be reached
    (`pacs_unreachable`); `http_status` is the PACS's own status when it answered."""

    def __init__(self, code: str, message: str, http_status: int | None = None) -> None:
        super().__init__(code, message, status=502 if code != "pacs_refused" else 424)
        self.http_status = http_status
