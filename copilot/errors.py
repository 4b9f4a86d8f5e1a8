"""Errors that handlers report to callers as structured JSON (code, message, HTTP status)."""

from __future__ import annotations

HTTP_STATUS = {
    "method_not_allowed": 405,
    "unknown_handler": 404,
    "not_in_track": 403,
    "unauthorized": 401,
    "forbidden": 403,
}


class HandlerError(Exception):
    """A refused call: nothing changed. `code` is machine-readable, `message` is for the model/user."""

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status if status is not None else HTTP_STATUS.get(code, 422)

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class MethodNotAllowed(HandlerError):
    """A known path asked with a method it does not take: 405, with the methods it does (HTTP's `Allow`)."""

    def __init__(self, message: str, allow: tuple[str, ...]) -> None:
        super().__init__("method_not_allowed", message, status=405)
        self.allow = allow


class ViewerError(HandlerError):
    """A viewer refused an operation (unknown volume, offset out of range, ...)."""
