"""Budgets in one unit per table: Table 7 holds call-budget runs only, a call-budget run at 20 is no Table 1
row, and a call budget ends tool offering when spent, exactly as a round budget does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from copilot.agent.loop import BUDGET_MESSAGE, ChatAgent
from copilot.agent.settings import AgentSettings
from copilot.bench.scoring.rules import unit_of, without_unit
from copilot.bench.tables.paper import table1
from copilot.bench.tables.paper_studies import table7
from copilot.medflow.bench_run import run_episode
from tests.fake_openai import FakeOpenAI, tool


def _row(budget: int, rules: str = "", strict: float = 1.0) -> dict[str, Any]:
    return {"case_id": "b1", "module": "brain_mri", "model": "m1", "policy": "openai:m1", "track": "A", "ops": "",
            "protocol": "harness", "budget": budget, "backend": "embedded", "seed": 0, "repeat": 0, "rules": rules,
            "status": "done", "task": 1.0, "strict": strict, "loc": 1.0, "details": {"fields": {}}}  # fmt: skip


def test_units_from_the_rules_key() -> None:
    """auto: rounds at 20, calls elsewhere; budget_unit=calls at 20 is calls; the key less its unit."""
    assert unit_of("", 20) == "rounds" and unit_of("", 5) == "calls"
    assert unit_of("budget_unit=calls", 20) == "calls" and unit_of("budget_unit=rounds", 5) == "rounds"
    assert without_unit("budget_unit=calls,key_slice_range=voxel_extent") == "key_slice_range=voxel_extent"


def test_table7_from_call_budget_runs_only() -> None:
    """Runs: 20 rounds (Strict 1), 5 calls (0.0), 10 calls (0.5), 20 calls (`--rule budget_unit=calls`, 0.25).
    Table 7: three rows in one group, 5, 10, 20 calls (Strict 0.00, 0.50, 0.25); the 20-round run is not in it.
    Table 1: the 20-round run is its one main row; the call-budget runs sit in the budget-study group."""
    rows = [_row(20), _row(5, strict=0.0), _row(10, strict=0.5), _row(20, "budget_unit=calls", strict=0.25)]
    t7 = table7(rows)
    assert [r[1].text() for r in t7.rows] == ["5 calls", "10 calls", "20 calls"]
    assert len(t7.groups) == 1
    brain_strict = 11  # Backbone, Max ops., NML..New NTL (6), Longitudinal Task and Strict, Brain Task, Strict
    assert [r[brain_strict].value for r in t7.rows] == [0.0, 0.5, 0.25]
    t1 = table1(rows)
    groups = dict(t1.groups)
    assert groups[0] == "General-purpose models" and t1.rows[0][0].text().startswith("m1")
    study_at = next(i for i, g in t1.groups if g.startswith("Budget study"))
    assert study_at == 1 and len(t1.rows) == 4  # one main row, then the three call-budget rows


def _agent(fake: FakeOpenAI) -> ChatAgent:
    settings = AgentSettings(base_url=fake.base_url, api_key="test", model="scripted-model", timeout_s=0.6,
                             max_retries=0, backoff_base_s=0.01, wall_clock_s=120)  # fmt: skip
    return ChatAgent(settings, sleep=lambda s: None)


def test_a_spent_call_budget_ends_tool_offering(brain_case: Path, tmp_path: Path) -> None:
    """Budget 4 calls; the model asks for three pings per round. Round 1 runs 3 (used 3); round 2 runs 1 (used 4)
    and its other 2 are refused; the budget is spent, so the next request offers no tools and asks for the
    answer: 2 tool rounds + 1 answer request = 3 requests, 2 refused calls. Before, tools were offered until the
    fourth round: 4 + 1 requests and 8 refused calls."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if "tools" not in body:
            return {"content": "ANSWER: A"}
        return {"tool_calls": [tool("ping"), tool("ping"), tool("ping")]}

    fake = FakeOpenAI(reply)
    try:
        row = run_episode(str(brain_case), "scripted", str(tmp_path), budget=4, trace_dir=tmp_path / "trace",
                          policy=_agent(fake))  # fmt: skip
    finally:
        fake.stop()
    events = [json.loads(line) for line in (tmp_path / "trace" / "trace.jsonl").read_text().splitlines()]
    refused = [e for e in events if e.get("type") == "call_refused"]
    ran = [e for e in events if e.get("type") == "handler_call" and e.get("actor") == "agent"]
    assert (row["status"], row["rounds"], len(ran), len(refused)) == ("budget_exhausted", 2, 4, 2)
    assert len(fake.requests) == 3 and "tools" not in fake.requests[-1]
    assert fake.requests[-1]["messages"][-1]["content"] == BUDGET_MESSAGE
