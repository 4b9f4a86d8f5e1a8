"""A run's report in Markdown, CSV and JSON carries the same tables, compared table by table and cell by cell;
a three-model run gets paired model-against-model deltas; every result carries its provenance."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from copilot.bench.report.publication import render
from copilot.bench.scoring.stats import sign_flip_p
from copilot.bench.tables.comparisons import model_pairs_table
from copilot.bench.tables.provenance import provenance_table
from copilot.medflow.bench_run import run_episode
from copilot.resources import resources_dir

STRICT = {"m1": [1.0, 1.0, 1.0], "m2": [0.0, 0.0, 1.0], "m3": [1.0, 0.0, 0.0]}
PROV = {"code": {"version": "0.1.0", "commit": "abcdef0123456789", "dirty": False}, "case_digest": "c" * 64,
        "prompt_sha256": "p" * 64, "tool_schema_sha256": "t" * 64, "price_table": "2025-10",
        "profile": {"id": "default", "version": "2026-12-03"}, "model_snapshots": ["snap-1"],
        "request": {"temperature": 0.0}}  # fmt: skip


def _rows() -> list[dict[str, Any]]:
    rows = []
    for model, strict in STRICT.items():
        for n, s in enumerate(strict):
            rows.append({"case_id": f"b{n}", "module": "brain_mri", "model": model, "policy": f"openai:{model}",
                         "track": "A", "ops": "", "protocol": "harness", "budget": 20, "backend": "embedded",
                         "seed": 0, "repeat": 0, "rules": "", "status": "done", "task": 1.0, "strict": s,
                         "loc": s, "parse_error": None, "rounds": 3, "response": "", "error": None,
                         "trace_dir": "", "duration_s": 1.5, "finished_at": 0.0,
                         "details": {"fields": {"label": {"given": "A", "truth": "A", "correct": True}}},
                         "process": {"provenance": PROV, "usage": {"prompt_tokens": 100, "completion_tokens": 10,
                                                                   "cost_usd": 0.001}}})  # fmt: skip
    return rows


def test_md_csv_and_json_carry_the_same_tables() -> None:
    """Every JSON table is in the Markdown (its title, and each row as the same cells) and in the CSV (each
    numeric cell's value to six places under the same table, row and column); tokens, cost, the measures,
    model pairs and provenance included."""
    rows = _rows()
    data = json.loads(render(rows, "json"))
    md = render(rows, "md")
    csv_rows = list(csv.DictReader(io.StringIO(render(rows, "csv"))))
    keys = {t["key"] for t in data["tables"]}
    assert {"table1", "measures", "model_pairs", "provenance", "passk", "coverage"} <= keys
    by_cell = {(r["table"], r["row"], r["column"]): r for r in csv_rows}
    checked = 0
    for t in data["tables"]:
        assert f"### {t['title']}" in md
        for row in t["rows"]:
            for col, cell in row["cells"].items():
                assert cell["text"] in md
                if isinstance(cell["value"], float):
                    assert by_cell[(t["key"], row["label"], col)]["value"] == f"{cell['value']:.6f}"
                    checked += 1
    assert checked > 50
    measures = next(t for t in data["tables"] if t["key"] == "measures")
    (m1,) = [r for r in measures["rows"] if r["label"].startswith("m1")]
    assert m1["cells"]["Tokens in"]["text"] == "300" and m1["cells"]["Cost $"]["value"] == pytest.approx(0.003)
    assert by_cell[("measures", m1["label"], "Tokens in")]["value"] == "300"


def test_three_models_paired_deltas_by_hand() -> None:
    """Strict per case: m1 [1, 1, 1], m2 [0, 0, 1], m3 [1, 0, 0]. m1 − m2: diffs [1, 1, 0], mean 2/3; sign flips
    over the two non-zero diffs: means 2/3, 0, 0, −2/3 → |mean| ≥ 2/3 in 2 of 4 → p 0.5. m1 − m3: [0, 1, 1],
    2/3, p 0.5; m2 − m3: [−1, 0, 1], mean 0 → p 1. Three pairs × Task, Strict, Loc = 9 rows."""
    t = model_pairs_table(_rows())
    assert len(t.rows) == 9
    strict = {r[0].text(): r for r in t.rows if r[3].text() == "Strict"}
    assert set(strict) == {"m1 − m2", "m1 − m3", "m2 − m3"}
    assert strict["m1 − m2"][6].value == pytest.approx(2 / 3) and strict["m1 − m2"][7].value == 0.5
    assert strict["m1 − m2"][4].value == 1.0 and strict["m1 − m2"][5].value == pytest.approx(1 / 3)
    assert strict["m2 − m3"][6].value == 0.0 and strict["m2 − m3"][7].value == 1.0
    assert strict["m1 − m2"][6].n == 3 and strict["m1 − m2"][6].ci is not None
    assert sign_flip_p([1.0, 1.0, 0.0]) == 0.5 and sign_flip_p([]) is None
    assert 0.0 < sign_flip_p([1.0] * 20) < 0.001  # 20 cases: seeded draws, (1 + 0) / 10,001


def test_provenance_table_and_a_real_episode(brain_case: Path, tmp_path: Path) -> None:
    """The table names code version and commit, case-pack, prompt and tool digests, price table, profile,
    snapshot and decoding; a `prior` episode records code, case digest, prompt and tool digests (no model:
    no profile, snapshot or request)."""
    (row,) = provenance_table([r for r in _rows() if r["model"] == "m1"]).rows
    assert [c.text() for c in row[1:]] == ["3", "0.1.0 @ abcdef012345", "c" * 12, "p" * 12, "t" * 12, "2025-10",
                                           "default 2026-12-03", "snap-1", '{"temperature":0.0}']  # fmt: skip
    out = run_episode(str(brain_case), "prior", str(tmp_path), budget=3)
    prov = out["process"]["provenance"]
    assert prov["code"]["version"] and len(prov["case_digest"]) == 64
    assert len(prov["prompt_sha256"]) == 64 and len(prov["tool_schema_sha256"]) == 64
    assert len(prov["prompt_template_sha256"]) == 64  # the templates: one digest for every case of a run
    assert (prov["profile"], prov["model_snapshots"], prov["request"]) == (None, [], None)
    assert prov["price_table"] == json.loads((resources_dir() / "model_prices.json").read_text())["version"]


def test_a_real_episode_in_every_format(brain_case: Path, tmp_path: Path) -> None:
    """One `baseline` episode's row: the JSON's provenance row names the case digest's first 12 digits, and the
    Markdown and CSV carry the same text; its Table 1 Strict cell is the same value in all three."""
    row = run_episode(str(brain_case), "baseline", str(tmp_path), budget=20)
    data = json.loads(render([row], "json"))
    prov = next(t for t in data["tables"] if t["key"] == "provenance")["rows"][0]
    digest = row["process"]["provenance"]["case_digest"][:12]
    assert prov["cells"]["Case packs"]["text"] == digest
    assert digest in render([row], "md") and digest in render([row], "csv")
    t1 = next(t for t in data["tables"] if t["key"] == "table1")
    cell = next(c for r in t1["rows"] for k, c in r["cells"].items() if k == "Brain MRI / Strict")
    by_cell = {(r["table"], r["column"]): r["value"] for r in csv.DictReader(io.StringIO(render([row], "csv")))}
    assert by_cell[("table1", "Brain MRI / Strict")] == f"{cell['value']:.6f}" and cell["text"] in render([row], "md")
