"""What a request cost: tokens × the price table (`resources/model_prices.json`, versioned; the user's own table
in `MEDCOPILOT_PRICES` overrides it entry by entry). A model without a price costs None — shown as tokens only,
never as 0."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from copilot.llm.types import Usage
from copilot.resources import resources_dir

Prices = dict[str, dict[str, float]]


@lru_cache(maxsize=1)
def shipped_table() -> dict[str, Any]:
    """The table shipped with MedCopilot: `{"version", "source", "models": {"provider:model": {...}}}`."""
    data: dict[str, Any] = json.loads((resources_dir() / "model_prices.json").read_text(encoding="utf-8"))
    return data


def price_table(override: str | Path | None = None) -> Prices:
    """Shipped prices with the user's file over them (keys `provider:model`, or a bare model id for any provider)."""
    table: Prices = dict(shipped_table()["models"])
    path = override or os.environ.get("MEDCOPILOT_PRICES")
    if path:
        user = json.loads(Path(path).read_text(encoding="utf-8"))
        table.update(user.get("models", user) if isinstance(user, dict) else {})
    return table


def price_of(prices: Prices, provider: str, model: str) -> dict[str, float] | None:
    """The price entry of a model: `provider:model` first, then the bare model id."""
    return prices.get(f"{provider}:{model}") or prices.get(model)


def cost_usd(usage: Usage, price: dict[str, float] | None) -> float | None:
    """US dollars: uncached input, cached input (at its own price, else the input price) and output per Mtok."""
    if not price:
        return None
    cached = min(usage.cached_tokens, usage.input_tokens)
    cached_price = price.get("cached_input_per_mtok", price.get("input_per_mtok", 0.0))
    return (
        (usage.input_tokens - cached) * price.get("input_per_mtok", 0.0)
        + cached * cached_price
        + usage.output_tokens * price.get("output_per_mtok", 0.0)
    ) / 1e6


def usage_words(usage: dict[str, Any]) -> str:
    """Tokens and cost in words: `1200 in (0 cached) / 80 out, $0.0004` (no price known: tokens only)."""
    cost = "no price known" if usage.get("cost_usd") is None else f"${usage['cost_usd']:.4f}"
    return (f"{usage.get('input_tokens', 0)} in ({usage.get('cached_tokens', 0)} cached) / "
            f"{usage.get('output_tokens', 0)} out, {cost}")  # fmt: skip
