"""Policies by name: `prior`, `scripted:FILE`, `baseline`, and a model (`openai[:MODEL]`, `anthropic:MODEL`,
`gemini:MODEL`, `azure:DEPLOYMENT`, `local:URL`: parsed by `copilot.llm.spec`)."""

from __future__ import annotations

from typing import Any

from copilot.agent.baselines import BaselinePolicy
from copilot.agent.policy import Policy, PriorPolicy, ScriptedPolicy
from copilot.llm.spec import is_model_policy, model_policy_help
from copilot.medflow.registry import modules

POLICY_HELP = f"prior | scripted:FILE | baseline | {model_policy_help()}"


def prior_policy() -> PriorPolicy:
    """Each module's fixed prior answer, without reading the images."""
    return PriorPolicy({name: m.prior for name, m in modules().items()})


def baseline_policy() -> BaselinePolicy:
    """Each module's offline image heuristic, acting through the handlers."""
    return BaselinePolicy({name: m.baseline for name, m in modules().items()})


def make_policy(spec: str, **settings: Any) -> Policy:
    """The policy a spec names; `settings` (model, base_url, budget…) override the environment for a model."""
    if spec == "prior":
        return prior_policy()
    if spec.startswith("scripted:"):
        return ScriptedPolicy(spec.split(":", 1)[1])
    if spec == "baseline":
        return baseline_policy()
    if is_model_policy(spec):
        from copilot.agent.loop import ChatAgent
        from copilot.agent.settings import AgentSettings

        return ChatAgent(AgentSettings.for_policy(spec, **settings))
    raise ValueError(f"unknown policy {spec!r}; use {POLICY_HELP}")
