"""Agent settings: which model (through the policy spec parser of `copilot.llm.spec`), sampling, limits, retries
and prices, from arguments or the environment.

Environment: the provider's own (`OPENAI_BASE_URL`/`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`,
`AZURE_OPENAI_ENDPOINT`/`AZURE_OPENAI_API_KEY`; each key also as `VAR_FILE`, a chmod 600 file), and
`MEDCOPILOT_MODEL`, `MEDCOPILOT_TEMPERATURE`, `MEDCOPILOT_TIMEOUT_S` (one request, default 90),
`MEDCOPILOT_ROUND_DEADLINE_S` (one round with its retries, default 90), `MEDCOPILOT_WALL_CLOCK_S`,
`MEDCOPILOT_MAX_RETRIES`, `MEDCOPILOT_STREAM` (0: whole replies), `MEDCOPILOT_PRICES` (a JSON price table over
the shipped `resources/model_prices.json`), `MEDCOPILOT_REASONING` (a level of the profile's reasoning control),
`MEDCOPILOT_TOOL_PROTOCOL` (`native` or `text`; default the profile's), `MEDCOPILOT_MAX_IMAGES` (images per
request; default the profile's), `MEDCOPILOT_WIRE` (`chat`: chat completions where the profile names the Responses
API). The model's profile (`copilot.llm.profiles`) says what of this the service accepts; nothing it refuses is sent.
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
    reasoning: str | None = None  # None: the service's default
    tool_protocol: str | None = None  # None: the profile's (native tool calls, or the text protocol)
    max_images: int | None = None  # None: the profile's images per request
    wire: str | None = None  # None: the profile's wire; "openai-chat" keeps chat completions
    adapt: bool = True  # adapt once to a server's image, context or tool refusal (traced); off: fail naming the flag
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
            "reasoning": env.get("MEDCOPILOT_REASONING") or None,
            "tool_protocol": env.get("MEDCOPILOT_TOOL_PROTOCOL") or None,
            "max_images": int(env["MEDCOPILOT_MAX_IMAGES"]) if env.get("MEDCOPILOT_MAX_IMAGES") else None,
            "wire": {"chat": "openai-chat", "responses": "openai-responses"}.get(env.get("MEDCOPILOT_WIRE", "")),
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

    def config_key(self) -> str:
        """The model configuration these settings run under (what `ChatAgent.config_key` records), known without
        a request: the profile of the model named, its wire, and what requests will carry."""
        from copilot.llm.connect import wire_class
        from copilot.llm.profiles import check_reasoning, check_tool_protocol, configuration, profile_for

        spec = self.spec()
        profile = profile_for(spec.provider, spec.model)
        protocol = check_tool_protocol(self.tool_protocol, profile)
        wire = str(wire_class(spec, self.wire).wire) + ("+text-tools" if protocol == "text" else "")
        temperature = self.temperature if profile.temperature else None
        return configuration(profile, wire, temperature, check_reasoning(profile, self.reasoning), protocol,
                             self.max_images or profile.max_images)  # fmt: skip

    def turn_cost(self, usage: Usage) -> float | None:
        """US dollars of one request (None when the model has no price)."""
        if self._price is None:  # the tables are read once per settings, not on every model turn
            self._price = (price_of({**price_table(), **self.prices}, self.provider, self.model),)
        return cost_usd(usage, self._price[0])

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """US dollars for a turn of these token counts (None when the model has no price)."""
        return self.turn_cost(Usage(prompt_tokens, completion_tokens))
