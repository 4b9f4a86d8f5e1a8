"""The model's streamed text shared between listeners: the panel hooks itself in front of whoever already listened
(a terminal), once per policy however many questions it is asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def chain_stream(policy: Any, listener: Callable[[str], None]) -> None:
    """Make `policy.on_stream` call `listener` after the listener it had before (kept across follow-ups)."""
    before = getattr(policy, "on_stream", None)
    other = getattr(before, "also", before)  # a follow-up: the listener a previous hook kept

    def forward(piece: str) -> None:
        if other is not None:
            other(piece)
        listener(piece)

    forward.also = other  # type: ignore[attr-defined]
    policy.on_stream = forward
