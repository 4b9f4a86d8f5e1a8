"""The preflight of a model policy as a run will use it: its settings' wire, profile, tool protocol and image
budget, checked with a few tiny requests (`copilot.llm.preflight`), with the run's token and cost estimate."""

from __future__ import annotations

from typing import Any

from copilot.agent.settings import AgentSettings
from copilot.llm.connect import connect
from copilot.llm.preflight import Preflight, context_needed, cost_estimate, run_checks
from copilot.llm.prices import price_of, price_table
from copilot.llm.profiles import check_reasoning, check_tool_protocol, profile_for

IMAGES_PER_ROUND = 3  # a radiology observe returns three views: the most one round adds


def listed_context(wire: Any, model: str) -> int | None:
    """The context a server lists for the model (vLLM's `max_model_len`), if it does."""
    try:
        for m in wire.client.models.list():
            if getattr(m, "id", None) == model:
                extra = getattr(m, "model_extra", None) or {}
                value = getattr(m, "max_model_len", None) or extra.get("max_model_len")
                return int(value) if value else None
    except Exception:  # a service without a listing: the profile's context stands
        return None
    return None


def check_policy_settings(settings: AgentSettings, cases: int = 1, rounds: int = 20) -> tuple[Preflight, str]:
    """The preflight report and the run's estimate (`cases` episodes of `rounds` rounds at most)."""
    spec, wire = connect(settings.spec(), min(settings.timeout_s, 60.0), settings.stream, wire=settings.wire)
    profile = profile_for(spec.provider, spec.model)
    protocol = check_tool_protocol(settings.tool_protocol, profile)
    if protocol == "text":
        spec, wire = connect(spec, min(settings.timeout_s, 60.0), settings.stream, tool_protocol="text",
                             wire=settings.wire)  # fmt: skip
    # the images a run's largest request keeps: the opening views and each round's, up to the budget
    images = min(settings.max_images or profile.max_images, IMAGES_PER_ROUND * (rounds + 1))
    per_request_images = min(images, IMAGES_PER_ROUND * 2)
    listed = listed_context(getattr(wire, "inner", wire), spec.model)
    needed = context_needed(images, rounds, profile.tokens_per_image)
    reasoning = check_reasoning(profile, settings.reasoning)
    report = run_checks(spec, wire, profile, protocol, per_request_images, needed, listed, reasoning)
    per_request = context_needed(images, rounds // 2, report.tokens_per_image or profile.tokens_per_image)
    price = price_of({**price_table(), **settings.prices}, spec.provider, spec.model)
    estimate = cost_estimate(cases, rounds, per_request, price)
    return report, f"estimate for {cases} case(s) × {rounds} rounds: {estimate}"
