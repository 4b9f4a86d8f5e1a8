"""The stream a wire is reading, held so Stop can close it from another thread (every wire shares this)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from copilot.llm.types import Reply


class InFlight:
    """Holds the response stream of the request being read; `abort` closes it (best effort, any thread)."""

    def __init__(self) -> None:
        self._open: Any = None
        self._lock = threading.Lock()

    def abort(self) -> None:
        with self._lock:
            stream, self._open = self._open, None
        close = getattr(stream, "close", None)
        if close is not None:
            close()

    def read(self, stream: Any, reader: Callable[[Any], Reply]) -> Reply:
        """`reader(stream)` with the stream held for `abort` while it runs."""
        with self._lock:
            self._open = stream
        try:
            return reader(stream)
        finally:
            with self._lock:
                self._open = None
