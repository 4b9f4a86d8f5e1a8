"""The policy interface shared by model-driven agents and offline policies, and the offline ones.

A policy runs one episode: it may call the session's handlers (every call is audited in the trace)
and returns the final response text, scored later exactly like a model's. Offline policies:
`prior` (no tool use; a fixed, documented prior answer per module) and `scripted:FILE` (a list of
handler calls followed by a final answer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from copilot.cases.pack import CasePack
from copilot.kinds import viewer_kind
from copilot.session import Session


@dataclass
class EpisodeResult:
    response: str
    status: str = "done"  # done | budget_exhausted | error
    rounds: int = 0
    error: str | None = None
    usage: dict[str, Any] | None = None  # a model's tokens and cost (None for offline policies)


class Policy(Protocol):
    name: str

    def run(self, session: Session, case: CasePack, budget: int) -> EpisodeResult: ...


class PriorPolicy:
    """No reading: one state query for the evidence position, then the module's fixed prior answer.

    `answers` maps a module to its prior answer (format fields: `evidence`, or `x` and `y` for slides).
    """

    name = "prior"

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def run(self, session: Session, case: CasePack, budget: int) -> EpisodeResult:
        if case.module not in self.answers:
            raise ValueError(f"no prior answer for this study (module {case.module!r}); it needs a MedFlow case pack")
        fmt: dict[str, str | float] = {"evidence": ""}
        kind = viewer_kind(case.kind)
        if kind.slice_views:
            views = session.call("get_viewer_state", {"include_volumes": False}).result.get("views", {})
            if views:
                s, r, a = views["red"]["offset"], views["yellow"]["offset"], views["green"]["offset"]
                fmt["evidence"] = (
                    f"EVIDENCE:\nKEY_SLICE_AXIAL_MM: {s}\nKEY_SLICE_SAGITTAL_MM: {r}\n"
                    f"KEY_SLICE_CORONAL_MM: {a}\nRAS: [{r}, {a}, {s}]\n"
                )
        elif kind.slide_coordinates:
            out = session.call("viewer_point_to_wsi_coordinate", {"x": 500, "y": 500})
            fmt["x"], fmt["y"] = out.result.get("x", 0.0), out.result.get("y", 0.0)
        return EpisodeResult(self.answers[case.module].format(**fmt), rounds=1)


class ScriptedPolicy:
    """Replays `{"calls": [{"handler", "args"}], "answer": "..."}`; `{case_id}` in the answer is filled in."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        data = json.loads(self.path.read_text(encoding="utf-8"))
        self.calls = list(data.get("calls", []))
        self.answer = str(data.get("answer", ""))
        self.name = f"scripted:{self.path.name}"

    def run(self, session: Session, case: CasePack, budget: int) -> EpisodeResult:
        rounds = 0
        for step in self.calls:
            if rounds >= budget:
                return EpisodeResult(self.answer.replace("{case_id}", case.case_id), "budget_exhausted", rounds)
            session.call(step["handler"], step.get("args", {}), actor="agent")
            rounds += 1
        return EpisodeResult(self.answer.replace("{case_id}", case.case_id), rounds=rounds)
