"""Every failure a process reports on its own is one line on stderr: background threads, unraisable exceptions
(atexit callbacks, finalisers) and log records alike, never a traceback (`MEDCOPILOT_DEBUG=1` keeps them).

Handlers already answer refusals by name; what is left are failures nobody waits for — a decode task of a
pool, a library's cleanup at exit, a server's own error log. Each is written as
`error: WHERE: TYPE: first line of the message`, with secrets (a URL's user-info, credential query parameters,
registered tokens) cut out.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from copilot.trace.redact import redact_text

NOISY_LOGGERS = ("tifffile", "tiffslide", "fsspec", "asyncio")  # libraries that warn once per damaged file or page


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


class OneLineFormatter(logging.Formatter):
    """Log records as one line each: the exception's type and first message line, never its traceback."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{record.levelname.lower()}: {record.name}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({first_line(record.exc_info[1])})"
        return redact_text(" ".join(text.split("\n"))[:1000])


_WRITE = threading.Lock()


def say(line: str) -> None:
    """Write one whole line to stderr (threads never interleave within a line)."""
    line = redact_text(line)
    with _WRITE:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _thread_hook(args: Any) -> None:
    if args.exc_type is SystemExit:
        return
    where = args.thread.name if args.thread is not None else "thread"
    say(f"error: background task {where}: {first_line(args.exc_value)}")


def _unraisable_hook(unraisable: Any) -> None:
    where = unraisable.err_msg or "ignored exception"
    exc = unraisable.exc_value
    text = first_line(exc) if exc is not None else str(unraisable.exc_type)
    say(f"error: {where.rstrip(':')}: {text}")


def install(level: int = logging.WARNING) -> None:
    """One line per failure for the rest of the process (nothing changes with MEDCOPILOT_DEBUG set). Hooks and
    handlers a host has installed already (a test runner's, an application's) are left in place."""
    if os.environ.get("MEDCOPILOT_DEBUG"):
        return
    if threading.excepthook is threading.__excepthook__:
        threading.excepthook = _thread_hook
    if sys.unraisablehook is sys.__unraisablehook__:
        sys.unraisablehook = _unraisable_hook
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(OneLineFormatter())
        root.addHandler(handler)
        root.setLevel(level)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for name in ("uvicorn", "uvicorn.error", "mcp"):
        logger = logging.getLogger(name)
        for h in logger.handlers:
            h.setFormatter(OneLineFormatter())
