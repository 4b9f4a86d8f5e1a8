"""Agent settings: which model (through the policy spec parser of `copilot.llm.spec`), sampling, limits, retries
and prices, from arguments or the environment.

Environment: the provider's own (`OPENAI_BASE_URL`/`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`,
`AZURE_OPENAI_ENDPOINT`/`AZURE_OPENAI_API_KEY`; each key also as `VAR_FILE`, a chmod 600 file), and
`MEDCOPILOT_MODEL`, `MEDCOPILOT_TEMPERATURE`, `MEDCOPILOT_TIMEOUT_S` (one request, default 90),
`MEDCOPILOT_ROUND_DEADLINE_S` (one round with its retries, default 90), `MEDCOPILOT_WALL_CLOCK_S`,
`MEDCOPILOT_MAX_RETRIES`, `MEDCOPILOT_STREAM` (0: whole replies), `MEDCOPILOT_PRICES` (a JSON price table over
the shipped `resources/model_prices.json`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from copilot.llm.prices import cost_usd, price_of, price_table
from copilot.llm.providers import PROVIDERS
from copilot.llm.spec import ModelSpec, parse_policy
from copilot.llm.types import Usage


@dataclass
class AgentSettings:
    base_url: str | None = None
    api_key: str = field(default="not-needed", repr=False)
    model: str = "gpt-4o-mini"
    provider: str = "openai"
    api_version: str | None = None
    temperature: float = 0.0
    timeout_s: float = 90.0
    round_deadline_s: float = 90.0
    wall_clock_s: float = 1800.0
    max_retries: int = 4
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    budget: int = 20
    image_detail: str = "auto"
    stream: bool = True
    max_tokens: int = 4096
    prices: dict[str, dict[str, float]] = field(default_factory=dict)  # over the shipped table and MEDCOPILOT_PRICES
    _price: tuple[dict[str, float] | None] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def for_policy(cls, policy: str = "openai", **overrides: Any) -> AgentSettings:
        """Settings of a model policy spec (`openai[:MODEL]`, `anthropic:MODEL`, `local:URL`…) with `model`,
        `base_url` and other overrides over the environment."""
        env = os.environ
        given = {k: v for k, v in overrides.items() if v is not None}
        spec = parse_policy(policy, given.pop("model", None), given.pop("base_url", None))
        values: dict[str, Any] = {
            "provider": spec.provider, "model": spec.model, "base_url": spec.base_url, "api_version": spec.api_version,
            "api_key": spec.api_key or "not-needed",
            "temperature": float(env.get("MEDCOPILOT_TEMPERATURE", cls.temperature)),
            "timeout_s": float(env.get("MEDCOPILOT_TIMEOUT_S", cls.timeout_s)),
            "round_deadline_s": float(env.get("MEDCOPILOT_ROUND_DEADLINE_S", cls.round_deadline_s)),
            "wall_clock_s": float(env.get("MEDCOPILOT_WALL_CLOCK_S", cls.wall_clock_s)),
            "max_retries": int(env.get("MEDCOPILOT_MAX_RETRIES", cls.max_retries)),
            "stream": env.get("MEDCOPILOT_STREAM", "1") not in ("0", "false", "no"),
        }  # fmt: skip
        values.update(given)
        return cls(**values)

    @classmethod
    def from_env(cls, **overrides: Any) -> AgentSettings:
        """Settings of the OpenAI-compatible policy (`openai`) from the environment and overrides."""
        return cls.for_policy("openai", **overrides)

    def spec(self) -> ModelSpec:
        """The model spec these settings send to."""
        wire = PROVIDERS[self.provider].wire
        key = "" if self.api_key == "not-needed" else self.api_key
        return ModelSpec(self.provider, self.model, wire, self.base_url, key, self.api_version)

    def turn_cost(self, usage: Usage) -> float | None:
        """US dollars of one request (None when the model has no price)."""
        if self._price is None:  # the tables are read once per settings, not on every model turn
            self._price = (price_of({**price_table(), **self.prices}, self.provider, self.model),)
        return cost_usd(usage, self._price[0])

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """US dollars for a turn of these token counts (None when the model has no price)."""
        return self.turn_cost(Usage(prompt_tokens, completion_tokens))
