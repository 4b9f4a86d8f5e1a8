"""Policies by name: `prior`, `scripted:FILE`, `baseline` and `openai[:MODEL]` (the one parser of policy specs)."""

from __future__ import annotations

from typing import Any

from copilot.agent.baselines import BaselinePolicy
from copilot.agent.policy import Policy, PriorPolicy, ScriptedPolicy
from copilot.medflow.registry import modules

POLICY_HELP = "prior | scripted:FILE | baseline | openai[:MODEL]"


def prior_policy() -> PriorPolicy:
    """Each module's fixed prior answer, without reading the images."""
    return PriorPolicy({name: m.prior for name, m in modules().items()})


def baseline_policy() -> BaselinePolicy:
    """Each module's offline image heuristic, acting through the handlers."""
    return BaselinePolicy({name: m.baseline for name, m in modules().items()})


def make_policy(spec: str, **settings: Any) -> Policy:
    """The policy a spec names; `settings` (model, base_url, budget…) override the environment for `openai`."""
    if spec == "prior":
        return prior_policy()
    if spec.startswith("scripted:"):
        return ScriptedPolicy(spec.split(":", 1)[1])
    if spec == "baseline":
        return baseline_policy()
    if spec == "openai" or spec.startswith("openai:"):
        from copilot.agent.loop import ChatAgent
        from copilot.agent.settings import AgentSettings

        given = {k: v for k, v in settings.items() if v is not None}
        given.setdefault("model", spec.split(":", 1)[1] if ":" in spec else None)
        return ChatAgent(AgentSettings.from_env(**given))
    raise ValueError(f"unknown policy {spec!r}; use {POLICY_HELP}")
