"""Process aggregates keyed by the full run configuration, pairs only across the one compared factor, and the
rules in the result key (hand-computed fixtures)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from copilot.bench.measures import configs as C
from copilot.bench.measures import dimensions as D
from copilot.bench.report.measures_report import measures_json, model_json
from copilot.bench.scoring.rules import parse_rules, rules_key
from copilot.medflow.runs import COLUMNS, SCHEMA_VERSION, ResultsDB


def row(case: str, strict: float, **key: Any) -> dict[str, Any]:
    base = {"model": "m", "policy": "baseline", "protocol": "harness", "track": "A", "budget": 20, "ops": "",
            "backend": "embedded", "rules": "", "repeat": 0, "seed": 0}  # fmt: skip
    return {**base, **key, "case_id": case, "module": "brain_mri", "strict": strict, "task": strict,
            "loc": None, "response": f"{case}-{strict}", "process": {"checkpoints": {"S": strict}}}  # fmt: skip


def test_provider_from_the_policy_prefix() -> None:
    assert [C.provider_of(p) for p in ("openai:gpt-x", "anthropic:claude", "gemini:g", "local:llama", "baseline",
                                       "scripted:a.json")] == ["openai", "anthropic", "gemini", "local", "offline",
                                                               "offline"]  # fmt: skip


def test_aggregates_never_pool_configurations() -> None:
    """Baseline rows: Track A budget 20 strict [1, 0] (mean S 0.5), Track B strict [1] (S 1.0), Track A paper
    protocol strict [0] (S 0.0), Track A budget 5 strict [0, 0] (S 0.0). Pooled by model the old report gave
    n = 6 and S = 2/6 = 0.33; keyed by configuration there are four rows with n 2, 1, 1, 2 and S 0.5, 1, 0, 0."""
    rows = [row("c1", 1.0), row("c2", 0.0), row("c1", 1.0, track="B", ops="all"),
            row("c1", 0.0, protocol="paper"), row("c1", 0.0, budget=5), row("c2", 0.0, budget=5)]  # fmt: skip
    out = model_json(rows)
    got = {(v["config"]["track"], v["config"]["protocol"], v["config"]["budget"]): (v["episodes"], v["checkpoint_S"])
           for v in out.values()}  # fmt: skip
    assert got == {("A", "harness", 20): (2, 0.5), ("B", "harness", 20): (1, 1.0), ("A", "paper", 20): (1, 0.0),
                   ("A", "harness", 5): (2, 0.0)}  # fmt: skip
    assert out["m · offline · harness · Track A · budget 20"]["pooled"] == {
        "episodes": 2, "cases": 2, "modules": 1, "repeats": 1, "seeds": 1}  # fmt: skip
    assert "nothing is pooled across configurations" in measures_json(rows)["pooling"]


def test_funnel_pairs_only_across_the_protocol() -> None:
    """Harness budget 20 c1 strict 1 pairs with paper budget 20 c1 strict 1 (ΔStrict 0); the paper budget-5 c1
    strict 0 has no harness twin at budget 5 and pairs with nothing (the old pairing by model and case matched
    it too and gave ΔStrict (0 + 1) / 2 = 0.5). One configuration, one pair, ΔStrict 0.00."""
    rows = [row("c1", 1.0), row("c1", 1.0, protocol="paper"), row("c1", 0.0, protocol="paper", budget=5)]
    funnels = measures_json(rows)["native_vs_harness"]
    assert list(funnels) == ["m · offline · harness vs paper · Track A · budget 20"]
    (f,) = funnels.values()
    assert (f["pairs"], f["delta_strict"]) == (1, 0.0)
    pairs = C.paired(rows, "protocol", "harness", "paper")
    assert [(a["budget"], b["budget"]) for ps in pairs.values() for a, b in ps] == [(20, 20)]
    with pytest.raises(ValueError, match="unknown configuration field"):
        C.paired(rows, "colour", 1, 2)


def test_pass3_per_configuration() -> None:
    """c1 Track A strict [1, 0, 0] over repeats: Pass@3 = 1 − C(2, 3)/C(3, 3) = 1; Track B strict [0, 0, 0]: 0.
    Pooled they would give n 6, c 1: 1 − C(5, 3)/C(6, 3) = 1 − 10/20 = 0.5."""
    rows = [row("c1", s, repeat=n) for n, s in enumerate((1.0, 0.0, 0.0))]
    rows += [row("c1", 0.0, repeat=n, track="B") for n in range(3)]
    assert sorted(D.pass3_by_model(rows).values()) == [0.0, 1.0]


def test_rules_key() -> None:
    """The paper's reading is ""; departures sorted name=value; budget_unit=rounds at budget 20 is what `auto`
    chooses there (no departure), budget_unit=calls at 20 is one; at budget 5 `auto` means calls."""
    assert rules_key(parse_rules([])) == ""
    assert rules_key(parse_rules(["lung_task_denominator=scorable", "brain_no_tumour_loc=zero"])) == (
        "brain_no_tumour_loc=zero,lung_task_denominator=scorable")  # fmt: skip
    assert rules_key(parse_rules(["budget_unit=rounds"]), 20) == ""
    assert rules_key(parse_rules(["budget_unit=calls"]), 20) == "budget_unit=calls"
    assert rules_key(parse_rules(["budget_unit=calls"]), 5) == ""
    assert parse_rules([]).unit_for(20) == "rounds" and parse_rules([]).unit_for(5) == "calls"
    with pytest.raises(ValueError, match="budget_unit"):
        parse_rules(["budget_unit=turns"])


def test_rules_are_in_the_result_key(tmp_path: Path) -> None:
    """The same case under two rule sets is two rows, and `done` under one key does not skip the other."""
    db = ResultsDB(tmp_path / "results.sqlite")
    base = {"case_id": "c1", "module": "lung_petct", "policy": "baseline", "track": "A", "status": "done", "task": 1.0,
            "strict": 1.0, "loc": None, "parse_error": None, "rounds": 1, "response": "", "error": None,
            "trace_dir": "", "duration_s": 0.0, "finished_at": 0.0}  # fmt: skip
    db.insert(base)
    db.insert({**base, "rules": "lung_task_denominator=scorable", "task": 0.75})
    assert sorted(r["rules"] for r in db.rows()) == ["", "lung_task_denominator=scorable"]
    assert db.done({"model": "baseline", "policy": "baseline", "track": "A"}) == {"c1"}
    key = {"model": "baseline", "policy": "baseline", "track": "A", "rules": "budget_unit=calls"}
    assert db.done(key) == set()
    db.close()


def test_schema_4_rows_migrate_with_no_model_configuration(tmp_path: Path) -> None:
    """A schema-4 database (no config column) opens as schema 5: its rows keep their keys, configuration ""."""
    path = tmp_path / "results.sqlite"
    conn = sqlite3.connect(path)
    old = [c for c in COLUMNS if c != "config"]
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '4')")
    conn.execute(f"CREATE TABLE results ({', '.join(old)})")
    row = {c: "" for c in old} | {"budget": 20, "seed": 0, "repeat": 0, "task": 1.0, "strict": 0.5, "rounds": 2,
                                  "duration_s": 1.0, "finished_at": 0.0, "details": "{}", "process": "{}",
                                  "case_id": "c1", "model": "gpt-5.5", "policy": "openai:gpt-5.5", "track": "A",
                                  "protocol": "harness", "backend": "embedded", "status": "done"}  # fmt: skip
    conn.execute(f"INSERT INTO results VALUES ({', '.join('?' for _ in old)})", [row[c] for c in old])
    conn.commit()
    conn.close()
    db = ResultsDB(path)
    (r,) = db.rows()
    assert (r["model"], r["config"], r["strict"]) == ("gpt-5.5", "", 0.5) and SCHEMA_VERSION == 5
    db.close()


def test_schema_3_rows_migrate_with_the_paper_rules(tmp_path: Path) -> None:
    """A schema-3 database (no rules nor config column) opens as the current schema with every row under rules ""
    and the model configuration ""."""
    path = tmp_path / "results.sqlite"
    conn = sqlite3.connect(path)
    old = [c for c in COLUMNS if c not in ("rules", "config")]
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    conn.execute(f"CREATE TABLE results ({', '.join(old)})")
    values = {"case_id": "c1", "module": "brain_mri", "model": "m", "policy": "baseline", "track": "A", "ops": "",
              "protocol": "paper", "budget": 20, "backend": "embedded", "seed": 0, "repeat": 0, "status": "done",
              "task": 1.0, "strict": 1.0, "loc": 1.0, "parse_error": None, "rounds": 3, "response": "A",
              "error": None, "trace_dir": "", "duration_s": 1.0, "finished_at": 0.0, "details": "{}",
              "process": "{}"}  # fmt: skip
    conn.execute(f"INSERT INTO results VALUES ({', '.join('?' for _ in old)})", [values[c] for c in old])
    conn.commit()
    conn.close()
    db = ResultsDB(path)
    (r,) = db.rows()
    assert (r["rules"], r["config"], r["protocol"], r["rounds"]) == ("", "", "paper", 3)
    assert db.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(
        SCHEMA_VERSION
    )
    db.close()


class _Session:
    """A session that records which calls reached it."""

    def __init__(self) -> None:
        self.reached: list[str] = []
        self.notes: list[str] = []

    def call(self, name: str, args: Any = None, actor: str = "agent", **kw: Any) -> str:
        self.reached.append(name)
        return name

    def note(self, event_type: str, payload: dict[str, Any]) -> None:
        self.notes.append(event_type)


def test_budget_in_rounds_and_in_calls() -> None:
    """Budget 2 in rounds: model turn 1 asks for three calls (round 1: all three run), turn 2 for one (round 2:
    runs), turn 3 for one (round 3 > 2: refused). In calls: the same five calls, the first two run. A policy
    without model turns spends one round per call, as in calls."""
    from copilot.medflow.bench_run import CallBudget

    def play(unit: str, turns: list[list[str]]) -> list[str]:
        s = _Session()
        b = CallBudget(s, 2, unit=unit)
        for names in turns:
            b.note("model_turn", {})
            for n in names:
                b.call(n, {})
        return s.reached

    turns = [["a", "b", "c"], ["d"], ["e"]]
    assert play("rounds", turns) == ["a", "b", "c", "d"]
    assert play("calls", turns) == ["a", "b"]
    offline = CallBudget(_Session(), 2, unit="rounds")
    assert [getattr(offline.call(n, {}), "ok", True) for n in "xyz"] == [True, True, False]


def test_one_seven_dimension_table() -> None:
    """The report carries the seven dimensions once, by their equations (the process-measures section); the
    older per-configuration table of trace metrics under the same names is gone."""
    from copilot.bench.report.run_report import render_report

    rows = [{**row("c1", 1.0), "status": "done", "parse_error": None, "trace_dir": "t", "rounds": 1,
             "details": {}, "process": {"dimensions": {"F": {"score": 0.5, "support": 1}}}}]  # fmt: skip
    page = render_report(rows, {})
    section = page.index('id="process-measures"')
    assert page.count("Care Action Fulfillment") == 2 and page.index("Care Action Fulfillment") > section
    assert 'id="process"' not in page and "Process metrics (from traces)" not in page
    assert '<span title="Care Action Fulfillment">F</span>' in page
