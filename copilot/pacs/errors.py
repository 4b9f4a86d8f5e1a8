"""The named refusals of PACS traffic (a handler reports them like any other refusal).

Codes: `pacs_refused` (HTTP 4xx), `pacs_failed` (5xx), `pacs_unreachable`, `pacs_tls`, `pacs_redirect` (to
another origin), `pacs_deadline`, `pacs_truncated` (connection dropped, body shorter than announced, no
closing boundary), `pacs_answer_too_large`, `pacs_part_too_large`, `pacs_too_deep`, `pacs_too_many`,
`pacs_bad_answer` (not the JSON or DICOM asked for, or another instance than asked for), `pacs_cache_full`,
`pacs_incomplete`, `pacs_not_ready` (a study still arriving when its waiter's timeout passed).
"""

from __future__ import annotations

from copilot.errors import HandlerError


class PacsError(HandlerError):
    """A named PACS refusal; `http_status` is the PACS's own status when it answered."""

    def __init__(self, code: str, message: str, http_status: int | None = None) -> None:
        super().__init__(code, message, status=502 if code != "pacs_refused" else 424)
        self.http_status = http_status


def http_refusal(what: str, status: int, reason: str) -> PacsError:
    """The refusal for an HTTP error answer (4xx `pacs_refused`, else `pacs_failed`); the reason made printable."""
    from copilot.pacs.printable import printable

    code = "pacs_refused" if 400 <= status < 500 else "pacs_failed"
    return PacsError(code, f"the PACS answered {what} with HTTP {status} {printable(reason, 80)}".strip(), status)
