"""Benchmark numbers a researcher can publish: each scoring or table defect reproduced on hand-built answers and
runs; the paper's tool protocol; bootstrap CIs against a hand-computed resample; runs that refuse what they
cannot score; batch runs that survive SIGKILL and a sibling run; Track C end to end against a fake service."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

from copilot.bench.measures.coverage import MAG_BINS, episode_coverage
from copilot.bench.scoring.rules import ScoringRules
from copilot.bench.scoring.scorers import Truth
from copilot.bench.scoring.stats import bootstrap_ci
from copilot.bench.tables.paper import table1
from copilot.bench.tables.paper_studies import protocol_table, table6
from copilot.bench.tables.render import to_csv, to_markdown
from copilot.cases.brain import make_brain_case
from copilot.cases.longitudinal import make_longitudinal_case
from copilot.cases.lung import make_lung_case
from copilot.cases.pack import load_case
from copilot.cases.wsi import make_breast_case, make_lymph_case
from copilot.medflow import score_case
from copilot.medflow.bench_run import run_batch
from copilot.medflow.runs import read_results
from copilot.replay import read_events
from copilot.runtime import open_session
from tests.fake_openai import FakeOpenAI, images_in, tool
from tests.oracle import evidence_block, perfect_evidence, perfect_response

CLI = [sys.executable, "-m", "copilot.cli"]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}

# Names typed from the paper's tables (Table 9: 3D Slicer tools; Table 10: QuPath direct tools).
TABLE_9 = [
    "ping", "open_case", "select_volume", "observe", "scroll", "zoom", "fit", "set_slice_offset",
    "get_slice_offset_range", "recover_standard_views", "image_coords_to_ras", "get_viewer_state", "wl",
    "window_preset", "jump", "set_layout", "fusion",
]  # fmt: skip
TABLE_10 = ["zoom", "pan", "focus_qupath", "capture_viewer", "viewer_point_to_wsi_coordinate"]
SEGMENTATION = ["segment_threshold", "segment_grow_from_seeds", "segment_statistics"]


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("packs")
    return {
        "brain": make_brain_case(out / "brain", "brain_A", 12, spacing=4.0, label="A"),
        "long": make_longitudinal_case(out / "long", "long_A", 5, spacing=6.0, label="A"),
        "lung": make_lung_case(out / "lung", "lung", 20, spacing=6.0),
        "breast_n": make_breast_case(out / "breast", "breast_N", 4, size=(1024, 768), mpp=2.0, label="N"),
        "lymph": make_lymph_case(out / "lymph", "lymph_macro", 3, size=(1024, 768), mpp=4.0, largest="macro"),
    }


def _row(model: str, module: str, task: float, strict: float, loc: float | None, **key: Any) -> dict[str, Any]:
    return {"case_id": key.pop("case_id", "c1"), "module": module, "model": model,
            "policy": key.pop("policy", f"openai:{model}"), "track": key.pop("track", "A"), "ops": "",
            "protocol": key.pop("protocol", "harness"), "budget": key.pop("budget", 20),
            "backend": key.pop("backend", "embedded"), "seed": 0, "repeat": key.pop("repeat", 0),
            "status": key.pop("status", "done"), "task": task, "strict": strict, "loc": loc, "parse_error": None,
            "rounds": 1, "response": "", "error": None, "trace_dir": "", "duration_s": 0.0, "finished_at": 0.0,
            "details": key.pop("details", {}), "process": {}}  # fmt: skip


def _texts(table: Any, row: int) -> list[str]:
    return [c.text() for c in table.rows[row]]


# ----- scoring defects -----


def test_longitudinal_task_is_the_label_alone(packs: dict[str, Path]) -> None:
    """A correct ANSWER with a scorable evidence field left out: Task 1 (label accuracy), Strict 0."""
    case = packs["long"]
    truth = json.loads((case / "hidden" / "truth.json").read_text())
    missing = next(k for k, v in truth["fields"].items() if v is not None)
    text = "\n".join(line for line in perfect_response(case).splitlines() if not line.startswith(missing))
    s = score_case(case, text)
    assert (s.task, s.strict, s.loc) == (1.0, 0.0, None)
    assert s.details["fields"][missing]["correct"] is False and f"missing {missing}" in (s.parse_error or "")
    assert (score_case(case, perfect_response(case)).task, score_case(case, perfect_response(case)).strict) == (1, 1)


def test_brain_key_slice_range_is_the_mask_not_half_a_voxel_more(packs: dict[str, Path]) -> None:
    """An axial key slice 1 mm above the highest mask voxel centre (4 mm voxels): outside the mask's range."""
    case = packs["brain"]
    truth = Truth(load_case(case))
    _, hi = truth.slice_extent("S")
    slices, ras = perfect_evidence(case)
    text = evidence_block({**slices, "S": hi + 1.0}, ras) + "ANSWER: A"
    s = score_case(case, text)
    assert (s.task, s.strict, s.loc) == (1.0, 0.0, 1.0)
    wide = score_case(case, text, rules=ScoringRules(key_slice_range="voxel_extent"))
    assert wide.strict == 1.0 and wide.details["rules"] == {"key_slice_range": "voxel_extent"}
    assert score_case(case, evidence_block({**slices, "S": hi}, ras) + "ANSWER: A").strict == 1.0


def test_paper_ambiguities_are_options_with_the_paper_reading_by_default(packs: dict[str, Path]) -> None:
    n_case = packs["breast_n"]
    with_point = json.dumps({"selected_option": "A", "wsi_label": "N", "localizations": [{"x": 10, "y": 10}]})
    assert (score_case(n_case, with_point).task, score_case(n_case, with_point).strict) == (1.0, 0.0)
    relaxed = score_case(n_case, with_point, rules=ScoringRules(breast_normal_localizations="not_required"))
    assert relaxed.strict == 1.0
    with pytest.raises(ValueError, match="must be one of"):
        ScoringRules(brain_no_tumour_loc="maybe")


def test_track_c_lung_gate_is_marked_unchecked(packs: dict[str, Path]) -> None:
    """Without a trace the source-series check cannot be made: passed by rule, and the table says so (†)."""
    case = packs["lung"]
    s = score_case(case, perfect_response(case))
    assert s.strict == s.task == 1.0 and s.details["unchecked"] == ["source_series"]
    strict_rule = score_case(case, perfect_response(case), rules=ScoringRules(untraced_source_series="fail"))
    assert strict_rule.strict == 0.0
    row = _row("m", "lung_petct", s.task, s.strict, s.loc, track="C", policy="answers", budget=0,
               backend="none", details=s.details)  # fmt: skip
    t6 = table6([row])
    assert _texts(t6, 0)[7] == "1.00†" and "†" in t6.caption


def test_pathology_hit_rate_ignores_the_system_overview(packs: dict[str, Path], tmp_path: Path) -> None:
    """The agent never looked beyond the overview the system opened: hit rate 0 at every magnification."""
    case = load_case(packs["lymph"])
    session = open_session(case, trace_dir=tmp_path / "t")
    session.call("focus_qupath", {}, actor="system")
    session.call("viewer_point_to_wsi_coordinate", {"x": 1, "y": 1}, actor="agent")
    session.close({"status": "done", "response": "", "error": None})
    cov = episode_coverage(read_events(tmp_path / "t")[0], case)
    assert cov["positive"] and all(cov["bins"][b]["hit"] is False for b in MAG_BINS)
    assert cov["bins"]["2.5×"]["fields"] == 0  # the system's overview is not the agent's exploration


# ----- table defects -----


def test_table6_matches_track_c_to_the_budget_20_run() -> None:
    rows = [
        _row("m1", "brain_mri", 0.0, 0.0, 0.0, budget=5),
        _row("m1", "brain_mri", 1.0, 1.0, 1.0, budget=20),
        _row("m1", "brain_mri", 1.0, 1.0, 1.0, track="C", policy="answers", budget=0, backend="none"),
    ]
    t6 = table6(rows)
    assert _texts(t6, 0)[0] == "m1 (scored answers) vs A b20" and _texts(t6, 0)[3:6] == ["1.00 (↔ 0.00)"] * 3


def test_table1_means_leave_out_floors_and_budget_study_runs() -> None:
    """Means over m1 (1.0) and m2 (0.5) only: 0.75; the prior floor (0.0) and m1's budget-5 run (0.0) are shown
    in their own groups without a mean."""
    rows = [
        _row("m1", "brain_mri", 1.0, 1.0, 1.0),
        _row("m1", "brain_mri", 0.0, 0.0, 0.0, budget=5),
        _row("m2", "brain_mri", 0.5, 0.5, 0.5),
        _row("prior", "brain_mri", 0.0, 0.0, 0.0, policy="prior"),
        _row("medgemma-4b", "brain_mri", 0.25, 0.0, 0.0),
    ]
    t1 = table1(rows)
    assert [r[0].text() for r in t1.rows] == [
        "m1 (budget 20)",
        "m2",
        "Mean over reported",
        "medgemma-4b",
        "prior",
        "m1 (budget 5)",
    ]
    assert [g for _, g in t1.groups] == ["General-purpose models", "Medical-domain models",
                                         "Reference policies (floors; not in means)",
                                         "Budget study (Table 7; not in means)"]  # fmt: skip
    assert _texts(t1, 2)[3] == "0.75" and t1.rows[0][3].bold and not t1.rows[1][3].bold
    md = to_markdown(t1)
    assert "| **0.75** |" not in md and "| m1 (budget 20) | — | — | **1.00** n=1 |" in md


def test_errored_episodes_are_shown_as_errors_never_as_zero() -> None:
    rows = [
        _row("m", "brain_mri", 1.0, 1.0, 1.0, case_id="a"),
        _row("m", "brain_mri", 0.0, 0.0, None, case_id="b", status="error"),
        _row("e", "brain_mri", 0.0, 0.0, None, case_id="a", status="error"),
    ]
    t1 = table1(rows)
    cells = {r[0].text(): r for r in t1.rows}
    assert cells["m"][3].text() == "1.00" and cells["m"][3].detail() == "n=1 error 1/2"
    assert cells["e"][3].text() == "error 1/1"
    assert "error 1/1" in to_markdown(t1) and ",1,2,0," in to_csv([t1])


def test_empty_tables_name_the_command_that_fills_them() -> None:
    md = to_markdown(table6([]))
    assert "filled by: medcopilot bench trackc --cases" in md
    assert "filled by: medcopilot bench trackc" in to_csv([table6([])])


# ----- statistics -----


def test_bootstrap_ci_against_a_hand_computed_resample() -> None:
    """Three cases (0, 1, 1), five resamples from seed 3: the resample means by hand, then the 2.5th and 97.5th
    percentiles by linear interpolation between the sorted means."""
    values = [0.0, 1.0, 1.0]
    idx = np.random.default_rng(3).integers(0, 3, size=(5, 3))
    means = sorted(sum(values[i] for i in row) / 3 for row in idx.tolist())

    def pct(q: float) -> float:
        pos = q / 100 * (len(means) - 1)
        lo = int(pos)
        return means[lo] + (means[min(lo + 1, len(means) - 1)] - means[lo]) * (pos - lo)

    lo, hi = bootstrap_ci(values, n_boot=5, seed=3)  # type: ignore[misc]
    assert (lo, hi) == pytest.approx((pct(2.5), pct(97.5)))
    assert bootstrap_ci([1.0]) is None  # one case: no interval
    rows = [_row("m", "brain_mri", v, v, v, case_id=f"c{n}") for n, v in enumerate(values)]
    rows += [_row("m", "brain_mri", 1.0, 1.0, 1.0, case_id="c0", repeat=1)]  # a repeat of c0: case mean 0.5
    cell = table1(rows).rows[0][3]
    assert (cell.n, cell.runs) == (3, 4) and cell.ci == pytest.approx(bootstrap_ci([0.5, 1.0, 1.0]))
    assert cell.detail().startswith("n=3 runs 4 [")  # n is cases (what the interval resamples), runs apart


# ----- runs that refuse what they cannot score -----


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env or ENV, timeout=timeout)


def test_unknown_or_unconfigured_policy_is_refused_before_any_episode(packs: dict[str, Path], tmp_path: Path) -> None:
    t0 = time.time()
    bogus = _cli("bench", "run", "--cases", str(packs["brain"]), "--policy", "bogus", "--out", str(tmp_path / "a"))
    assert bogus.returncode == 2 and len(bogus.stderr.strip().splitlines()) == 1 and "bogus" in bogus.stderr
    assert not (tmp_path / "a" / "results.sqlite").exists()
    unconfigured = _cli("bench", "run", "--cases", str(packs["brain"]), "--policy", "openai:gpt-x",
                        "--out", str(tmp_path / "b"))  # fmt: skip
    assert unconfigured.returncode == 2 and "OPENAI_BASE_URL" in unconfigured.stderr
    assert len(unconfigured.stderr.strip().splitlines()) == 1 and not (tmp_path / "b" / "episodes").exists()
    assert time.time() - t0 < 60


def test_errored_episode_recorded_exit_status_and_resume_count(packs: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"calls": [{"args": {}}], "answer": "ANSWER: A"}))  # a call without a handler
    run = tmp_path / "run"
    out = _cli("bench", "run", "--cases", str(packs["brain"]), "--policy", f"scripted:{broken}", "--out", str(run),
               "--workers", "1")  # fmt: skip
    assert out.returncode == 3 and "1 of 1 episodes errored" in out.stderr and "error 1/1" in out.stdout
    (row,) = read_results(run / "results.sqlite")
    assert row["status"] == "error" and "KeyError" in row["error"]
    assert "error 1/1" in (run / "report.html").read_text()
    prior = ["bench", "run", "--cases", str(packs["brain"]), "--policy", "prior", "--out", str(run), "--workers", "1"]
    ok, again = _cli(*prior), _cli(*prior)
    assert ok.returncode == again.returncode == 0 and "skipped 1 episodes already done" in again.stderr


def test_other_seed_backend_and_model_into_an_existing_folder_add_rows(packs: dict[str, Path], tmp_path: Path) -> None:
    run, cases = tmp_path / "run", str(packs["brain"])
    run_batch(cases, "prior", run, progress=None)
    out = _cli("bench", "run", "--cases", cases, "--policy", "prior", "--out", str(run), "--workers", "1", "--seed=7")
    assert out.returncode == 0, out.stderr  # a folder written by an earlier run is no obstacle
    run_batch(cases, "prior", run, progress=None, backend="slicer")
    run_batch(cases, "prior", run, progress=None, model="prior-renamed")
    rows = read_results(run / "results.sqlite")
    keys = sorted((r["seed"], r["backend"], r["model"]) for r in rows)
    assert keys == [(0, "embedded", "prior"), (0, "embedded", "prior-renamed"), (0, "slicer", "prior"),
                    (7, "embedded", "prior")]  # fmt: skip
    assert len({r["trace_dir"] for r in rows}) == 4 and all(r["status"] == "done" for r in rows)


def test_symlinked_case_packs_run(packs: dict[str, Path], tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "linked").symlink_to(packs["brain"], target_is_directory=True)
    (cases / "loop").symlink_to(cases, target_is_directory=True)  # a link loop ends
    rows = run_batch(cases, "prior", tmp_path / "run", progress=None)
    assert [r["case_id"] for r in rows] == ["brain_A"]


def test_max_ops_counts_calls_not_rounds(packs: dict[str, Path], tmp_path: Path) -> None:
    """Budget 2, one round asking for three calls: two reach the viewer, the third is refused."""
    state = tool("get_viewer_state", {"include_volumes": False})
    fake = FakeOpenAI([{"tool_calls": [state, state, state]}, {"content": "ANSWER: A"}])
    try:
        os.environ["OPENAI_BASE_URL"] = fake.base_url
        rows = run_batch(packs["brain"], "openai:m", tmp_path / "run", progress=None, budget=2)
    finally:
        os.environ.pop("OPENAI_BASE_URL", None)
        fake.stop()
    events = read_events(tmp_path / "run" / rows[0]["trace_dir"])[0]
    agent_calls = [e for e in events if e.get("type") == "handler_call" and e.get("actor") == "agent"]
    refused = [e for e in events if e.get("type") == "call_refused"]
    assert len(agent_calls) == 2 and len(refused) == 1 and rows[0]["task"] == 1.0


# ----- protocols -----


def test_paper_protocol_exposes_exactly_the_papers_tools(packs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    cases = tmp_path / "cases"
    cases.mkdir()
    for name in ("brain", "lymph"):
        (cases / name).symlink_to(packs[name], target_is_directory=True)
    paper = run_batch(cases, "baseline", run, progress=None, protocol="paper")
    harness = run_batch(cases, "baseline", run, progress=None)
    track_b = run_batch(packs["brain"], "prior", run, progress=None, protocol="paper", track="B", ops="segmentation")
    headers = {r["module"]: read_events(run / r["trace_dir"])[0][0] for r in paper}
    assert headers["brain_mri"]["tools"] == TABLE_9 and headers["lymph_node_wsi"]["tools"] == TABLE_10
    assert all(h["protocol"] == "paper" for h in headers.values())
    b_head = read_events(run / track_b[0]["trace_dir"])[0][0]
    assert sorted(b_head["tools"]) == sorted(TABLE_9 + SEGMENTATION)
    for r in paper + track_b:
        events = read_events(run / r["trace_dir"])[0]
        assert not any("warnings" in (e.get("result") or {}) for e in events)  # no guard speaks
    h_head = read_events(run / harness[0]["trace_dir"])[0][0]
    assert h_head["protocol"] == "harness" and {r["protocol"] for r in harness} == {"harness"}
    assert "record_key_slice" in h_head["tools"] and len(h_head["tools"]) > len(TABLE_9)
    side = protocol_table(read_results(run / "results.sqlite"))
    assert {c[1].text() for c in side.rows} == {"Brain MRI", "Lymph-node WSI"}
    assert side.rows[0][2].text() == "Task"
    html_text = (run / "report.html").read_text()
    assert "Protocols side by side" in html_text and "Protocol: harness, paper." in html_text


# ----- batch runs that survive kills and siblings -----

SLOW = {
    "calls": [{"handler": "scroll", "args": {"view": "red", "num_slices": 12, "output": "cine", "size": 256}}] * 3,
    "answer": "No evidence.\nANSWER: A",
}


@pytest.fixture(scope="module")
def four(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("four")
    for n in range(3):
        make_brain_case(out, f"b{n}", 30 + n, spacing=4.0)
    return out


def _rows(db: Path) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_kill_9_of_the_coordinator_ends_its_workers_and_the_rerun_completes(four: Path, tmp_path: Path) -> None:
    """Episodes of several seconds: a worker still alive 3 s after the kill would have outlived its coordinator."""
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({**SLOW, "calls": SLOW["calls"] * 4}))
    run = tmp_path / "run"
    cmd = ["bench", "run", "--cases", str(four), "--policy", f"scripted:{script}", "--workers", "2", "--out", str(run)]
    proc = subprocess.Popen([*CLI, *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    deadline = time.time() + 120
    while not list(run.glob("episodes/**/trace.jsonl")) and time.time() < deadline:
        time.sleep(0.05)
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert workers, "no worker started"
    os.kill(proc.pid, signal.SIGKILL)  # the coordinator only, not its process group
    proc.wait()
    _, alive = psutil.wait_procs(workers, timeout=3)
    assert not alive, f"workers outlived the coordinator: {[p.pid for p in alive]}"
    assert _rows(run / "results.sqlite") < 3
    rerun = _cli(*cmd)
    assert rerun.returncode == 0, rerun.stderr
    rows = read_results(run / "results.sqlite")
    assert sorted(r["case_id"] for r in rows) == ["b0", "b1", "b2"] and all(r["status"] == "done" for r in rows)


def test_two_runs_on_one_folder_are_serialised(four: Path, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({**SLOW, "calls": SLOW["calls"] * 30}))  # the first still runs when the second starts
    run = tmp_path / "run"
    cmd = [*CLI, "bench", "run", "--cases", str(four), "--policy", f"scripted:{script}", "--workers", "1",
           "--budget", "100", "--out", str(run)]  # fmt: skip
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.time() + 120
    while not (run / ".lock").exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert (run / ".lock").exists(), f"the first run never took the lock: {first.communicate(timeout=60)[1]}"
    time.sleep(0.3)
    second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    (_, err1), (_, err2) = first.communicate(timeout=300), second.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, err1 + err2
    assert "waiting for the run holding" in err2 and "skipped 3 episodes already done" in err2
    assert _rows(run / "results.sqlite") == 3


# ----- Track C end to end -----


def test_trackc_sends_montages_and_scores_into_the_run(packs: dict[str, Path], tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    for name in ("brain", "lung"):
        (cases / name).symlink_to(packs[name], target_is_directory=True)
    answers = {json.loads((packs[n] / "case.json").read_text())["case_id"]: perfect_response(packs[n])
               for n in ("brain", "lung")}  # fmt: skip

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        text = body["messages"][1]["content"][0]["text"]
        return {"content": next(a for cid, a in answers.items() if cid in text)}

    fake = FakeOpenAI(reply)
    try:
        out = _cli("bench", "trackc", "--cases", str(cases), "--policy", "openai:vlm-x", "--out", str(tmp_path / "run"),
                   "--base-url", fake.base_url)  # fmt: skip
    finally:
        fake.stop()
    assert out.returncode == 0, out.stderr
    assert len(fake.requests) == 2 and all(images_in(r) >= 1 for r in fake.requests)
    assert all("no viewer and no tools" in r["messages"][1]["content"][0]["text"] for r in fake.requests)
    rows = read_results(tmp_path / "run" / "results.sqlite")
    assert {(r["track"], r["model"], r["task"], r["strict"]) for r in rows} == {("C", "vlm-x", 1.0, 1.0)}
    t6 = table6(rows)
    assert t6.groups == [(0, "2D slice-montage: general-purpose backbones")]  # the paper's grouping
    assert _texts(t6, 0)[0] == "vlm-x (Alt. only)" and _texts(t6, 0)[3] == "1.00" and _texts(t6, 0)[7] == "1.00†"
    refused = _cli("bench", "trackc", "--cases", str(cases), "--policy", "openai:vlm-x", "--out", str(tmp_path / "r2"))
    assert refused.returncode == 2 and "OPENAI_BASE_URL" in refused.stderr


def test_paper_protocol_sends_the_papers_tools_and_prompt_to_the_model(packs: dict[str, Path], tmp_path: Path) -> None:
    fake = FakeOpenAI([{"content": "ANSWER: A"}])
    try:
        os.environ["OPENAI_BASE_URL"] = fake.base_url
        run_batch(packs["brain"], "openai:m", tmp_path / "run", progress=None, protocol="paper")
    finally:
        os.environ.pop("OPENAI_BASE_URL", None)
        fake.stop()
    request = fake.requests[0]
    assert [t["function"]["name"] for t in request["tools"]] == TABLE_9
    system = request["messages"][0]["content"]
    assert system.startswith("You are an AI radiology assistant using a remote MRI viewer (3D Slicer). The case has")
    assert "At most 20 tool-calling rounds" in system
    user = request["messages"][1]["content"][0]["text"]
    assert "Case brief for brain_A:" in user and "<CASE_ID>" not in user and "{" not in user.split("Baseline")[0]
    sources = json.loads((Path(__file__).parent.parent / "resources/prompts/paper/SOURCES.json").read_text())
    assert sources["files"]["brain_mri.txt"]["verbatim"] is True


def test_rules_on_the_command_line_are_checked_and_recorded(packs: dict[str, Path], tmp_path: Path) -> None:
    bad = _cli("bench", "run", "--cases", str(packs["brain"]), "--policy", "prior", "--out", str(tmp_path / "a"),
               "--rule", "key_slice_range=loose")  # fmt: skip
    assert bad.returncode == 2 and "key_slice_range must be one of" in bad.stderr and not (tmp_path / "a").exists()
    rows = run_batch(packs["brain"], "prior", tmp_path / "b", progress=None,
                     rules=ScoringRules(key_slice_range="voxel_extent"))  # fmt: skip
    assert rows[0]["details"]["rules"] == {"key_slice_range": "voxel_extent"}


def test_a_results_database_of_schema_2_gains_the_protocol_column(tmp_path: Path) -> None:
    """Rows written before the protocol joined the key are kept, as `harness` runs."""
    db = tmp_path / "results.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
        conn.execute(
            "CREATE TABLE results (case_id TEXT NOT NULL, module TEXT NOT NULL, model TEXT NOT NULL, policy TEXT NOT "
            "NULL, track TEXT NOT NULL, ops TEXT NOT NULL, budget INTEGER NOT NULL, backend TEXT NOT NULL, seed "
            "INTEGER NOT NULL, repeat INTEGER NOT NULL, status TEXT NOT NULL, task REAL NOT NULL, strict REAL NOT "
            "NULL, loc REAL, parse_error TEXT, rounds INTEGER NOT NULL, response TEXT NOT NULL, error TEXT, trace_dir "
            "TEXT NOT NULL, duration_s REAL NOT NULL, finished_at REAL NOT NULL, details TEXT NOT NULL, process TEXT "
            "NOT NULL, PRIMARY KEY (case_id, model, policy, track, ops, budget, backend, seed, repeat))"
        )
        conn.execute("INSERT INTO results VALUES ('c', 'brain_mri', 'm', 'prior', 'A', '', 20, 'embedded', 0, 0, "
                     "'done', 1, 1, 1, NULL, 1, 'r', NULL, 't', 0, 0, '{}', '{}')")  # fmt: skip
    (row,) = read_results(db)
    assert (row["case_id"], row["protocol"], row["task"]) == ("c", "harness", 1.0)


def test_an_episode_folder_of_an_earlier_killed_run_is_recognised_and_redone(tmp_path: Path) -> None:
    from copilot.medflow.runs import MARKER, clear_trace_dir

    ours = tmp_path / "ours"
    (ours / "artifacts").mkdir(parents=True)
    for name in (MARKER, "episode.html", "trace.jsonl", "partial.tmp"):
        (ours / name).write_text("x")
    clear_trace_dir(ours)  # the marker says the project wrote it, whatever else a kill left there
    assert not ours.exists()
    old = tmp_path / "old"
    old.mkdir()
    for name in ("episode.html", "trace.jsonl", "answer.txt"):
        (old / name).write_text("x")
    clear_trace_dir(old)  # a folder of an earlier version: only trace entries and its page
    assert not old.exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a trace"):
        clear_trace_dir(foreign)
    assert (foreign / "notes.txt").exists()


def test_a_service_that_rejects_the_key_is_refused_before_any_episode(packs: dict[str, Path], tmp_path: Path) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    class Reject(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Reject)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {**ENV, "OPENAI_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/v1", "OPENAI_API_KEY": "bad"}
        out = _cli("bench", "run", "--cases", str(packs["brain"]), "--policy", "openai:m", "--out",
                   str(tmp_path / "run"), env=env)  # fmt: skip
    finally:
        server.shutdown()
    assert out.returncode == 2 and "refused the credentials (HTTP 401)" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "run" / "results.sqlite").exists()
