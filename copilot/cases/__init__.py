"""Case packs: what the agent may see (case.json, images/) and hidden ground truth (hidden/)."""

from copilot.cases.pack import CasePack, load_case

__all__ = ["CasePack", "load_case"]
