"""One model round under a deadline, with retries only where retrying can help, and Stop that stops at once.

The request runs in a daemon thread; the caller waits on it, the cancel event and the round's deadline, so a
service that never answers holds the clinician at most until Stop (about 50 ms) or the deadline. Retried: 429
(after Retry-After), 5xx, timeouts and dropped connections; never another 4xx.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from copilot.llm.types import ChatRequest, ModelError, Reply

POLL_S = 0.05


class ChatModel(Protocol):
    """A provider's wire: one request (streaming text to `on_text`), abort of what is in flight, its model list."""

    wire: str

    def complete(self, request: ChatRequest, on_text: Callable[[str], None] | None = None) -> Reply: ...

    def abort(self) -> None: ...

    def list_models(self) -> list[str]: ...


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry within one round."""

    max_retries: int = 4
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0

    def wait(self, attempt: int, error: ModelError) -> float:
        base = error.retry_after if error.retry_after is not None else self.backoff_base_s * 2**attempt
        return min(self.backoff_cap_s, base)


def run_cancellable(
    fn: Callable[[], Reply], cancel: threading.Event | None, deadline: float, abort: Callable[[], None]
) -> Reply:
    """`fn()` in a daemon thread; ModelError `cancelled` / `deadline` as soon as either comes first."""
    done = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["reply"] = fn()
        except BaseException as exc:  # handed to the waiting caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, daemon=True, name="model-request").start()
    while not done.wait(POLL_S):
        if cancel is not None and cancel.is_set():
            _quietly(abort)
            raise ModelError("cancelled", "the request was stopped")
        if time.monotonic() > deadline:
            _quietly(abort)
            raise ModelError("deadline", "the model service did not answer within the round's deadline "
                                         "(MEDCOPILOT_ROUND_DEADLINE_S)")  # fmt: skip
    if "error" in box:
        raise box["error"]
    reply: Reply = box["reply"]
    return reply


def _quietly(fn: Callable[[], None]) -> None:
    with contextlib.suppress(Exception):  # aborting is best effort: the caller has already moved on
        fn()


def request_round(
    model: ChatModel,
    request: ChatRequest,
    *,
    deadline: float,
    cancel: threading.Event | None = None,
    retry: RetryPolicy = RetryPolicy(),
    on_text: Callable[[str], None] | None = None,
    on_retry: Callable[[int, float, ModelError], None] | None = None,
    sleep: Callable[[float], Any] | None = None,
) -> Reply:
    """One round's reply: retried on retryable errors while the deadline allows; the last error raised."""
    live = threading.Event()
    live.set()

    def relay(text: str) -> None:  # text of an abandoned request is dropped
        if on_text is not None and live.is_set():
            on_text(text)

    attempt = 0
    try:
        while True:
            try:
                return run_cancellable(lambda: model.complete(request, relay), cancel, deadline, model.abort)
            except ModelError as exc:
                if not exc.retryable or attempt >= retry.max_retries:
                    raise
                wait = retry.wait(attempt, exc)
                if time.monotonic() + wait > deadline:
                    raise
                attempt += 1
                if on_retry is not None:
                    on_retry(attempt, wait, exc)
                if sleep is not None:
                    sleep(wait)
                elif cancel is not None and cancel.wait(wait):
                    raise ModelError("cancelled", "the request was stopped") from exc
                elif cancel is None:
                    time.sleep(wait)
    finally:
        live.clear()
