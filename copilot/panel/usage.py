"""Tokens and cost added up over a conversation's questions (the panel's per-session line)."""

from __future__ import annotations

from typing import Any


def add_usage(total: dict[str, Any] | None, more: dict[str, Any]) -> dict[str, Any]:
    """Tokens added up; the cost too while every part has one (None once a part had no price)."""
    if total is None:
        return dict(more)
    out = {k: int(total.get(k, 0)) + int(more.get(k, 0)) for k in ("input_tokens", "output_tokens", "cached_tokens")}
    cost = None if total.get("cost_usd") is None or more.get("cost_usd") is None else \
        round(float(total["cost_usd"]) + float(more["cost_usd"]), 6)  # fmt: skip
    return {**out, "cost_usd": cost}
