"""Policies beyond the offline `prior`/`scripted:` ones: `baseline` and `openai[:MODEL]`."""

from __future__ import annotations

from typing import Any


def make(spec: str) -> Any:
    if spec == "baseline":
        from copilot.agent.baselines import BaselinePolicy

        return BaselinePolicy()
    if spec == "openai" or spec.startswith("openai:"):
        from copilot.agent.loop import ChatAgent
        from copilot.agent.settings import AgentSettings

        model = spec.split(":", 1)[1] if ":" in spec else None
        return ChatAgent(AgentSettings.from_env(model=model))
    raise ValueError(f"unknown policy {spec!r}; use prior, scripted:FILE, baseline or openai[:MODEL]")
