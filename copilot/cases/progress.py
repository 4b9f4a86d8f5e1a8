"""Progress of long case generation (slides, volumes), reported to whoever listens (the command line's stderr).

Generators call `report(what, fraction)`; nothing is printed unless a caller installed a listener with
`listening(fn)`, so library use and tests stay silent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

Listener = Callable[[str, float], None]
_LISTENER: ContextVar[Listener | None] = ContextVar("case_progress", default=None)


def report(what: str, fraction: float) -> None:
    """Tell the listener, if any, that `what` is `fraction` (0–1) done."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(what, fraction)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the progress reported inside the block to `listener`."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def printer(stream: TextIO) -> Listener:
    """A listener that writes 'what: NN%' to a stream: rewritten in place on a terminal, else one line per
    tenth (and at 100 %), so a log stays short."""
    last: dict[str, int] = {}
    tty = stream.isatty()

    def show(what: str, fraction: float) -> None:
        pct = int(max(0.0, min(1.0, fraction)) * 100)
        step = pct if tty else pct // 10 * 10
        if last.get(what) == step:
            return
        last[what] = step
        if tty:
            stream.write(f"\r{what}: {pct:3d}%" + ("\n" if pct == 100 else ""))
        else:
            stream.write(f"{what}: {step}%\n")
        stream.flush()

    return show
