"""Per-episode measures from the related benchmarks, stored with the episode's process metrics."""

from __future__ import annotations

from typing import Any

from copilot.bench.failures import detect_failures
from copilot.cases.pack import CasePack


def _response(events: list[dict[str, Any]]) -> str:
    end = next((e for e in reversed(events) if e.get("type") == "episode_end"), {})
    return str(end.get("response", ""))


def harness_measures(events: list[dict[str, Any]], case: CasePack, score: Any, budget: int) -> dict[str, Any]:
    """Failure labels (and, below, stages, checkpoints, claim boundaries, dimensions, usage) of one episode."""
    response = _response(events)
    return {"failures": [f.to_json() for f in detect_failures(events, case, response)]}
