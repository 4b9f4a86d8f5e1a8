"""Agent settings: model service, sampling, limits, retries and prices, from arguments or the environment.

Environment: `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `MEDCOPILOT_MODEL`, `MEDCOPILOT_TEMPERATURE`,
`MEDCOPILOT_TIMEOUT_S`, `MEDCOPILOT_WALL_CLOCK_S`, `MEDCOPILOT_MAX_RETRIES`, `MEDCOPILOT_PRICES` (a JSON file
`{"model": {"input_per_mtok": 0.4, "output_per_mtok": 1.6}}`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class AgentSettings:
    base_url: str | None = None
    api_key: str = "not-needed"
    model: str = "gpt-4o-mini"
    temperature: float = 0.0
    timeout_s: float = 120.0
    wall_clock_s: float = 1800.0
    max_retries: int = 4
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    budget: int = 20
    image_detail: str = "auto"
    prices: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def from_env(cls, **overrides: Any) -> AgentSettings:
        env = os.environ
        prices: dict[str, dict[str, float]] = {}
        if env.get("MEDCOPILOT_PRICES"):
            prices = json.loads(Path(env["MEDCOPILOT_PRICES"]).read_text(encoding="utf-8"))
        values: dict[str, Any] = {
            "base_url": env.get("OPENAI_BASE_URL"),
            "api_key": env.get("OPENAI_API_KEY", "not-needed"),
            "model": env.get("MEDCOPILOT_MODEL", cls.model),
            "temperature": float(env.get("MEDCOPILOT_TEMPERATURE", cls.temperature)),
            "timeout_s": float(env.get("MEDCOPILOT_TIMEOUT_S", cls.timeout_s)),
            "wall_clock_s": float(env.get("MEDCOPILOT_WALL_CLOCK_S", cls.wall_clock_s)),
            "max_retries": int(env.get("MEDCOPILOT_MAX_RETRIES", cls.max_retries)),
            "prices": prices,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """US dollars for one turn from the price table (None when the model has no price)."""
        price = self.prices.get(self.model)
        if not price:
            return None
        return (
            prompt_tokens * price.get("input_per_mtok", 0.0) + completion_tokens * price.get("output_per_mtok", 0.0)
        ) / 1e6
