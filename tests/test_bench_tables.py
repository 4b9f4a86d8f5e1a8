"""The paper's tables, per-case details, process metrics, coverage and workflow guards on small fixtures whose
values are computed by hand; a budget rerun adds rows; `bench report` works from results.sqlite alone; episode
pages and the report render in headless Chromium."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from copilot.bench.tables.analysis import first_divergence, guard_table, stability
from copilot.bench.tables.paper import paper_tables, table1, table3
from copilot.bench.tables.paper_studies import table5, table6, table7
from copilot.bench.tables.render import to_csv, to_html, to_markdown
from copilot.cases.brain import make_brain_case
from copilot.cases.longitudinal import make_longitudinal_case
from copilot.cases.lung import make_lung_case
from copilot.cases.wsi import make_breast_case, make_lymph_case
from copilot.medflow.bench_run import run_batch
from copilot.medflow.runs import ResultsDB, SchemaError, read_results
from copilot.runtime import open_session
from tests.oracle import evidence_block, perfect_evidence, perfect_response

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CLI = [sys.executable, "-m", "copilot.cli"]


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("packs")
    return {
        "brain": make_brain_case(out, "brain_A", 12, spacing=4.0, label="A"),
        "long": make_longitudinal_case(out, "long_A", 5, spacing=6.0, label="A"),
        "lung": make_lung_case(out, "lung", 20, spacing=6.0),
        "breast": make_breast_case(out, "breast_DCIS", 5, size=(1024, 768), mpp=2.0, label="DCIS"),
        "lymph": make_lymph_case(out, "lymph_macro", 3, size=(1024, 768), mpp=4.0, largest="macro"),
    }


def _row(model: str, module: str, task: float, strict: float, loc: float | None, **key: Any) -> dict[str, Any]:
    fields: dict[str, Any] = key.pop("fields", {})
    return {
        "case_id": key.pop("case_id", f"{module}_{task}_{strict}"),
        "module": module,
        "model": model,
        "policy": key.pop("policy", f"openai:{model}"),
        "track": key.pop("track", "A"),
        "ops": key.pop("ops", ""),
        "budget": key.pop("budget", 20),
        "backend": "embedded",
        "seed": 0,
        "repeat": key.pop("repeat", 0),
        "status": "done",
        "task": task,
        "strict": strict,
        "loc": loc,
        "parse_error": None,
        "rounds": 1,
        "response": "",
        "error": None,
        "trace_dir": "",
        "duration_s": 0.0,
        "finished_at": 0.0,
        "details": {"fields": fields},
        "process": key.pop("process", {}),
    }


def _f(correct: bool | None) -> dict[str, Any]:
    return {"given": "x", "truth": "y", "correct": correct}


def _cells(table: Any, row: int) -> list[str]:
    return [c.text() for c in table.rows[row]]


def test_tables_hand_computed_from_rows() -> None:
    """Two brain cases (Task 1, 0; Strict 1, 0; Loc 1, 0), one longitudinal (0, 0), one lung (0.6, 0.6, Loc 1):
    Table 1 row m1 = Long 0.00 0.00 | Brain 0.50 0.50 0.50 | Lung 0.60 0.60 1.00 | Avg (0+0.5+0.6)/3 = 0.37,
    (0+0.5+0.6)/3 = 0.37, (0.5+1)/2 = 0.75."""
    lf = {"NON_MEASURABLE_LESION": _f(True), "T2_PROGRESSION": _f(False), "NEW_NON_TARGET_LESION": _f(None)}
    rows = [
        _row("m1", "brain_mri", 1.0, 1.0, 1.0, case_id="b1"),
        _row("m1", "brain_mri", 0.0, 0.0, 0.0, case_id="b2"),
        _row("m1", "longitudinal_mri", 0.0, 0.0, None, fields=lf),
        _row("m1", "lung_petct", 0.6, 0.6, 1.0, fields={q: _f(q in "123") for q in "12345"}),
        _row("m1", "brain_mri", 0.0, 0.0, 0.0, case_id="b1", budget=5),
        _row("m1", "brain_mri", 1.0, 1.0, 1.0, case_id="b1", track="B", ops="segmentation"),
        _row("m1", "brain_mri", 1.0, 0.0, 1.0, case_id="b1", track="C", policy="answers"),
        _row("m1", "longitudinal_mri", 1.0, 1.0, None, track="B", ops="registration"),
        _row("m1", "longitudinal_mri", 1.0, 0.0, None, track="B", ops="none"),
    ]
    t1 = table1(rows)
    labels = [r[0].text() for r in t1.rows]
    assert labels == ["m1 (budget 20)", "m1 (budget 5)"]  # the budget-5 run is a budget-study row, in no mean
    assert [g for _, g in t1.groups] == ["General-purpose models", "Budget study (Table 7; not in means)"]
    assert _cells(t1, 0)[1:] == ["0.00", "0.00", "0.50", "0.50", "0.50", "0.60", "0.60", "1.00", "0.37", "0.37", "0.75"]
    assert _cells(t1, 1)[3:6] == ["0.00", "0.00", "0.00"] and _cells(t1, 1)[9] == "—"  # no lung: no Model Avg.
    t5 = table5(rows)
    c5 = _cells(t5, 0)
    assert c5[1:7] == ["1.00", "0.00", "—", "—", "—", "—"]  # NML right, T2 wrong, unscorable field left out
    assert c5[12:18] == ["0.60", "1.00", "1.00", "1.00", "0.00", "0.00"]  # lung Task then Q1..Q5 accuracy
    t3 = table3(rows)  # Track B segmentation on brain: 1.00 against Track A (budget 20) 0.50 → ↑ 0.50
    assert t3.header[0][2:] == [("Segmentation", 1), ("Registration", 1)]
    task = _cells(t3, 0)
    assert task[1] == "Task" and task[2] == "1.00 (↑ 0.50)"
    assert task[3] == "1.00 (↔ 0.00)"  # registration on longitudinal against the unregistered control (Task 1)
    assert _cells(t3, 1)[3] == "1.00 (↑ 1.00)" and _cells(t3, 2)[3] == "—"  # Strict vs control 0; no Loc.
    t6 = table6(rows)  # Track C brain: Task 1 (↑ 0.50), Strict 0 (↓ 0.50), Loc 1 (↑ 0.50)
    assert _cells(t6, 0)[3:6] == ["1.00 (↑ 0.50)", "0.00 (↓ 0.50)", "1.00 (↑ 0.50)"]
    t7 = table7(rows)
    assert [r[1].text() for r in t7.rows] == ["5 calls"] and _cells(t7, 0)[10:13] == ["0.00", "0.00", "0.00"]
    md = to_markdown(t1)
    assert "| Model | Longitudinal MRI / Task |" in md
    assert "| m1 (budget 20) | 0.00 n=1 | 0.00 n=1 | 0.50 n=2 [0.00, 1.00] |" in md  # n and 95% CI per cell
    csv_text = to_csv(paper_tables(rows))
    assert "table1,General-purpose models,m1 (budget 20),Model Avg. / Loc.,0.750000," in csv_text
    # Table 6 grouped as the paper's (2D slice-montage backbones); an answer file is its model's row, so marked
    assert ("table6,2D slice-montage: general-purpose backbones,m1 (scored answers) vs A b20,Brain MRI / Strict,"
            "0.000000,-0.500000,1,") in csv_text  # fmt: skip
    html_text = "".join(to_html(t) for t in (t3, t6))
    assert 'class="up"' in html_text and 'class="strict down"' in html_text and 'class="same"' in html_text


def test_stability_and_divergence() -> None:
    sig = ["a:1", "b:2", "c:3"]
    rows = [
        _row("m", "brain_mri", 1.0, 1.0, 1.0, case_id="c", repeat=0, process={"signature": sig}),
        _row("m", "brain_mri", 1.0, 0.0, 1.0, case_id="c", repeat=1, process={"signature": [*sig[:2], "x:9"]}),
        _row("m", "brain_mri", 0.0, 0.0, 0.0, case_id="c", repeat=2, process={"signature": sig}),
    ]
    rows[0]["details"]["fields"] = rows[1]["details"]["fields"] = {"label": {"given": "A"}}
    rows[2]["details"]["fields"] = {"label": {"given": "B"}}
    (s,) = stability(rows)
    assert s["repeats"] == 3 and s["answer_agreement"] == pytest.approx(2 / 3)
    assert s["strict_agreement"] == pytest.approx(2 / 3) and s["distinct_traces"] == 2 and s["first_divergence"] == 3
    assert first_divergence([sig, sig]) is None and first_divergence([sig, sig[:1]]) == 2


def test_old_results_database_is_refused(tmp_path: Path) -> None:
    old = tmp_path / "results.sqlite"
    with sqlite3.connect(old) as conn:
        conn.execute(
            "CREATE TABLE results (case_id TEXT, policy TEXT, track TEXT, PRIMARY KEY (case_id, policy, track))"
        )
    with pytest.raises(SchemaError, match=r"schema 1.*schema 5"):
        ResultsDB(old)
    proc = subprocess.run([*CLI, "bench", "report", str(tmp_path), "--format", "csv"], capture_output=True, text=True)
    assert proc.returncode == 2 and "results schema 1" in proc.stderr


def test_perfect_answers_scored_with_details_and_problems_reported(packs: dict[str, Path], tmp_path: Path) -> None:
    answers = tmp_path / "oracle.jsonl"
    lines = [json.dumps({"case_id": p.name, "response": perfect_response(p)}) for p in packs.values()]
    lines += [json.dumps({"case_id": "not_a_case", "response": "ANSWER: A"}), "{broken"]
    answers.write_text("\n".join(lines) + "\n")
    root = next(iter(packs.values())).parent
    run = tmp_path / "run"
    proc = subprocess.run(
        [
            *CLI,
            "bench",
            "score",
            "--cases",
            str(root),
            "--answers",
            str(answers),
            "--json",
            "--out",
            str(run),
            "--model",
            "oracle",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stderr  # an unknown id and a broken line are reported
    out = json.loads(proc.stdout)
    assert out["unknown_case_ids"] == ["not_a_case"] and out["problems"][0]["line"] == 7
    by_id = {c["case_id"]: c for c in out["cases"]}
    assert all((c["task"], c["strict"]) == (1.0, 1.0) for c in by_id.values())
    lung = by_id["lung"]["details"]
    assert [e["kind"] for e in lung["evidence"]] == ["key_slice"] * 3 + ["ras", "source_series"]
    assert lung["evidence"][4]["ok"] is None  # answers without a trace: provenance cannot be checked
    assert all(f["correct"] for f in lung["fields"].values()) and lung["gate"] is True
    assert by_id["lymph_macro"]["details"]["evidence"][0]["ok"] is True
    rows = read_results(run / "results.sqlite")
    assert {(r["model"], r["track"], r["task"], r["strict"]) for r in rows} == {("oracle", "C", 1.0, 1.0)}
    t6 = table6(rows)
    # the lung Strict passed the source-series check unchecked (no trace): marked †, never silently
    assert t6.groups == [(0, "2D slice-montage: general-purpose backbones")]
    assert t6.rows[0][0].text() == "oracle (scored answers) (Alt. only)"
    assert _cells(t6, 0)[1:] == ["1.00"] * 6 + ["1.00†", "1.00"]
    table = subprocess.run(
        [*CLI, "bench", "score", "--cases", str(root), "--answers", str(answers)], capture_output=True, text=True
    ).stdout
    assert "brain_mri" in table and "   1.00    1.00    1.00" in table  # fractions, as the tables print


def _script(path: Path, calls: list[dict[str, Any]], answer: str) -> str:
    path.write_text(json.dumps({"calls": calls, "answer": answer}))
    return f"scripted:{path}"


def test_lung_source_series_gate_and_fault_metrics(packs: dict[str, Path], tmp_path: Path) -> None:
    """The same perfect lung answer, evidence taken on the PET (faulty script) or on the source CT.

    Faulty script (8 agent calls, budget 20): select PET; jump to the tumour; record_point on PET (guard:
    off_source_series); record_key_slice at S + 24 mm, never shown (guards: off_source_series, unobserved_evidence);
    observe twice (the second is redundant); register_volumes in Track A (refused: conduct); a bad offset (invalid).
    By hand: Task 1, Strict 0 (series gate), Loc 1; resource 1 - 2/8 = 0.75, budget used 0.40, conduct 0,
    evidence alignment 1 (jump showed all three planes through the point), auditability 1."""
    lung = packs["lung"]
    slices, ras = perfect_evidence(lung)
    answer = (
        "Rationale.\n"
        + evidence_block(slices, ras)
        + "".join(f"{q}{json.loads((lung / 'hidden' / 'truth.json').read_text())['answers'][q]}" for q in "12345")
    )
    off = ras[2] + 24.0 if ras[2] < 100 else ras[2] - 24.0
    faulty = [
        {"handler": "select_volume", "args": {"volume_name": "PET_AC", "size": 64}},
        {"handler": "jump", "args": {"ras": list(ras), "size": 64}},
        {"handler": "record_point", "args": {"ras": list(ras)}},
        {"handler": "record_key_slice", "args": {"view": "red", "offset": off}},
        {"handler": "observe", "args": {"view": "red", "size": 64}},
        {"handler": "observe", "args": {"view": "red", "size": 64}},
        {
            "handler": "register_volumes",
            "args": {"fixed_volume": "CT_diagnostic", "moving_volume": "PET_AC", "output_transform": "t"},
        },
        {"handler": "set_slice_offset", "args": {"view": "red", "offset": "abc"}},
    ]
    good = [
        {"handler": "select_volume", "args": {"volume_name": "CT_diagnostic", "size": 64}},
        {"handler": "jump", "args": {"ras": list(ras), "size": 64}},
        {"handler": "record_point", "args": {"ras": list(ras)}},
    ]
    run = tmp_path / "run"
    (bad_row,) = run_batch(lung, _script(tmp_path / "faulty.json", faulty, answer), run, progress=None, model="faulty")
    (good_row,) = run_batch(lung, _script(tmp_path / "good.json", good, answer), run, progress=None, model="good")
    assert (bad_row["task"], bad_row["strict"], bad_row["loc"]) == (1.0, 0.0, 1.0)
    assert (good_row["task"], good_row["strict"], good_row["loc"]) == (1.0, 1.0, 1.0)
    series = [e for e in bad_row["details"]["evidence"] if e["kind"] == "source_series"]
    assert [(e["item"], e["series"], e["ok"]) for e in series] == [
        ("key_slices", "PET_AC", False),
        ("ras", "PET_AC", False),
    ]
    p = bad_row["process"]
    assert p["workflow_guards"] == {"off_source_series": 2, "unobserved_evidence": 1}
    assert p["resource_competence"] == {"calls": 8, "invalid": 1, "redundant": 1, "budget_used": 0.4, "score": 0.75}
    assert p["conduct"] == {"out_of_track": 1, "handlers": ["register_volumes"], "score": 0.0}
    assert p["evidence_alignment"]["score"] == 1.0 and p["auditability"]["score"] == 1.0
    assert p["closed_loop_verification"]["score"] is None and p["care_action_fulfillment"]["score"] == 1.0
    assert good_row["process"]["workflow_guards"] == {} and good_row["process"]["conduct"]["score"] == 1.0
    cov = p["coverage"]
    assert cov["lesion_seen"] is True and cov["first_seen_call"] is not None
    guards = guard_table(read_results(run / "results.sqlite"))
    assert [[c.text() for c in r] for r in guards.rows] == [  # one row per run configuration
        ["faulty · offline · harness · Track A · budget 20", "1", "0", "2", "0", "1", "1"],
        ["good · offline · harness · Track A · budget 20", "1", "0", "0", "0", "0", "0"],
    ]
    # the trace records the warning the model saw
    trace = (run / bad_row["trace_dir"] / "trace.jsonl").read_text()
    assert '"code":"off_source_series"' in trace and '"code":"unobserved_evidence"' in trace


def test_fusion_guards_unregistered_and_superseded(packs: dict[str, Path]) -> None:
    session = open_session(packs["long"], track="B")
    fused = session.call(
        "fusion", {"background_volume_ref": "CURRENT_CT1", "foreground_volume_ref": "OLD_CT1", "size": 64}
    )
    assert [w["code"] for w in fused.result["warnings"]] == ["unregistered_fusion"]
    same = session.call(
        "fusion", {"background_volume_ref": "CURRENT_CT1", "foreground_volume_ref": "CURRENT_FLAIR", "size": 64}
    )
    assert "warnings" not in same.result
    reg = session.call(
        "register_volumes",
        {
            "fixed_volume": "CURRENT_CT1",
            "moving_volume": "OLD_CT1",
            "output_transform": "old_to_cur",
            "max_iterations": 5,
            "size": 64,
        },
    )
    assert reg.ok, reg.error
    applied = session.call(
        "apply_transform", {"volume": "OLD_CT1", "transform": "old_to_cur", "output_volume": "OLD_CT1_reg"}
    )
    assert applied.ok, applied.error
    stale = session.call(
        "fusion", {"background_volume_ref": "CURRENT_CT1", "foreground_volume_ref": "OLD_CT1", "size": 64}
    )
    assert [w["code"] for w in stale.result["warnings"]] == ["unregistered_fusion", "superseded_node"]
    fresh = session.call(
        "fusion", {"background_volume_ref": "CURRENT_CT1", "foreground_volume_ref": "OLD_CT1_reg", "size": 64}
    )
    assert "warnings" not in fresh.result


def test_budget_rerun_adds_rows_and_report_from_sqlite_alone(packs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = run_batch(packs["brain"], "prior", run, progress=None, budget=20)
    again = run_batch(packs["brain"], "prior", run, progress=None, budget=20)  # resumed: nothing new
    third = run_batch(packs["brain"], "prior", run, progress=None, budget=3, repeats=2)
    rows = read_results(run / "results.sqlite")
    assert len(first) == len(again) == 1 and len(third) == 2 and len(rows) == 3
    assert sorted((r["budget"], r["repeat"]) for r in rows) == [(3, 0), (3, 1), (20, 0)]
    assert len({r["trace_dir"] for r in rows}) == 3
    (s,) = stability(rows)
    assert (s["repeats"], s["answer_agreement"], s["distinct_traces"], s["first_divergence"]) == (2, 1.0, 1, None)
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(run / "results.sqlite", alone / "results.sqlite")
    md = subprocess.run([*CLI, "bench", "report", str(alone), "--format", "md"], capture_output=True, text=True)
    assert md.returncode == 0 and "| prior (budget 20) |" in md.stdout and "| prior (budget 3) |" in md.stdout
    assert "### Table 7: Operation-budget study (Track A)" in md.stdout
    csv_out = subprocess.run([*CLI, "bench", "report", str(alone), "--format", "csv"], capture_output=True, text=True)
    assert (
        csv_out.stdout.startswith("table,group,row,column,value,delta")
        and "table7,prior,prior 3 calls,Brain MRI / Answer + evidence / Task,1.000000," in csv_out.stdout
    )
    html_run = subprocess.run([*CLI, "bench", "report", str(alone)], capture_output=True, text=True)
    assert html_run.returncode == 0
    original = (run / "report.html").read_text()
    regenerated = (alone / "report.html").read_text()
    section = slice(original.index('<h2 id="table1">'), original.index("<h2>Track A"))
    assert regenerated[regenerated.index('<h2 id="table1">') : regenerated.index("<h2>Track A")] == original[section]


def _chromium(url: str, shot: Path, tmp: Path, height: int = 1400) -> str:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
    ]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", f"--window-size=1280,{height}", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    return dom


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by `make test` (Debian package)")
def test_episode_pages_and_report_screenshots(packs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    for name in ("lung", "breast"):
        run_batch(packs[name], "baseline", run, progress=None)
    rows = {r["module"]: r for r in read_results(run / "results.sqlite")}
    lung, breast = rows["lung_petct"], rows["breast_wsi"]
    t1, t2 = paper_tables(list(rows.values()))[:2]  # one baseline episode each: the cells are that episode's scores
    assert _cells(t1, 0)[6:9] == [f"{lung[k]:.2f}" for k in ("task", "strict", "loc")]
    assert _cells(t1, 0)[1:3] == ["—", "—"] and _cells(t1, 0)[9:] == ["—", "—", "—"]  # Model Avg. needs all three
    assert _cells(t2, 0)[1:4] == [f"{breast[k]:.2f}" for k in ("task", "strict", "loc")]
    report_dom = _chromium((run / "report.html").as_uri(), tmp_path / "report.png", tmp_path)
    assert 'data-table="table1"' in report_dom and 'data-table="table2"' in report_dom
    assert report_dom.count("episode.html") == 2
    lung_page = run / rows["lung_petct"]["trace_dir"] / "episode.html"
    dom = _chromium(lung_page.as_uri(), tmp_path / "lung_episode.png", tmp_path, 2400)
    assert dom.count('class="evidence-view"') == 3 and "source_series" in dom and "Prompt" in dom
    assert dom.count('class="coverage-axis"') == 3 and "image_coords_to_ras" in dom
    breast_page = run / rows["breast_wsi"]["trace_dir"] / "episode.html"
    bdom = _chromium(breast_page.as_uri(), tmp_path / "breast_episode.png", tmp_path, 2000)
    assert 'class="overview"' in bdom and "wsi_point" in bdom and "40×" in bdom
    for shot in ("report.png", "lung_episode.png", "breast_episode.png"):
        img = np.asarray(Image.open(tmp_path / shot).convert("RGB"), dtype=int)
        assert img.min() < 100  # text and images were drawn
    # the lung page draws the views: red (RAS point) and yellow (key-slice lines) pixels exist in its screenshot
    img = np.asarray(Image.open(tmp_path / "lung_episode.png").convert("RGB"), dtype=int)
    red = (img[..., 0] > 200) & (img[..., 1] < 80) & (img[..., 2] < 80)
    yellow = (img[..., 0] > 200) & (img[..., 1] > 180) & (img[..., 2] < 60)
    assert red.sum() > 20 and yellow.sum() > 100
