"""Batch runs: resumable after a kill with exactly one result per case, identical scores through a Dask
LocalCluster, a report that opens in headless Chromium, and Track C montages."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from copilot.bench.report.montage import write_montages
from copilot.medflow import make_cases
from copilot.medflow.bench_run import run_batch
from copilot.medflow.runs import ResultsDB

SLOW_SCRIPT = {
    "calls": [{"handler": "scroll", "args": {"view": "red", "num_slices": 30, "output": "cine", "size": 384}}] * 3,
    "answer": "No evidence.\nANSWER: A",
}


@pytest.fixture(scope="module")
def brain_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("set")
    make_cases("brain_mri", 6, 2, out / "cases", spacing=4.0)
    return out / "cases"


def _count(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        try:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        except sqlite3.OperationalError:
            return 0


def test_killed_run_resumes_with_one_result_per_case(brain_set: Path, tmp_path: Path) -> None:
    script = tmp_path / "slow.json"
    script.write_text(json.dumps(SLOW_SCRIPT))
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "copilot.cli",
        "bench",
        "run",
        "--cases",
        str(brain_set),
        "--policy",
        f"scripted:{script}",
        "--workers",
        "1",
        "--out",
        str(run),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while _count(run / "results.sqlite") < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _count(run / "results.sqlite")
    assert 2 <= partial < 6, "the run was not killed midway"
    rows = run_batch(brain_set, f"scripted:{script}", run, workers=2, progress=None)
    assert sorted(r["case_id"] for r in rows) == sorted(p.name for p in brain_set.iterdir())
    assert _count(run / "results.sqlite") == 6
    # every episode left a complete, replayable trace
    from copilot.replay import replay

    for r in rows:
        assert replay(run / r["trace_dir"]).ok
    assert all(
        r["task"]
        == (
            1.0 if json.loads((brain_set / r["case_id"] / "hidden" / "truth.json").read_text())["label"] == "A" else 0.0
        )
        for r in rows
    )


def test_dask_local_cluster_gives_identical_scores(brain_set: Path, tmp_path: Path) -> None:
    from dask.distributed import Client, LocalCluster

    local = run_batch(brain_set, "prior", tmp_path / "local", workers=2, progress=None)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        distributed = run_batch(brain_set, "prior", tmp_path / "dask", scheduler=client, progress=None)

    def key(rows: list[dict]) -> list[tuple]:
        return sorted((r["case_id"], r["task"], r["strict"], r["loc"], r["response"]) for r in rows)

    assert key(local) == key(distributed) and len(local) == 6


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by `make test` (Debian package)")
def test_report_renders_in_headless_chromium(brain_set: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_batch(brain_set, "prior", run, workers=1, progress=None)
    report = run / "report.html"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert '<table class="main" data-track="A">' in dom
    assert dom.count('class="plot hist"') >= 1 and 'class="plot gap"' in dom
    assert dom.count("<tr>") >= 6 + 2 and "trace.jsonl" in dom
    shot = tmp_path / "report.png"
    subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1200,900", report.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    from PIL import Image

    img = Image.open(shot).convert("L")
    assert img.size == (1200, 900) and img.getextrema()[0] < 100  # text was drawn


def test_results_db_keeps_one_row_per_case(tmp_path: Path) -> None:
    db = ResultsDB(tmp_path / "r.sqlite")
    row = {
        "case_id": "c1",
        "module": "brain_mri",
        "policy": "p",
        "track": "A",
        "status": "done",
        "task": 1.0,
        "strict": 0.0,
        "loc": None,
        "parse_error": None,
        "rounds": 1,
        "response": "x",
        "error": None,
        "trace_dir": "t",
        "duration_s": 0.1,
        "finished_at": 1.0,
    }
    db.insert(row)
    db.insert({**row, "strict": 1.0})
    key = {"model": "p", "policy": "p", "track": "A", "ops": "", "budget": 20, "backend": "embedded", "seed": 0,
           "repeat": 0}  # fmt: skip
    assert [r["strict"] for r in db.rows()] == [1.0] and db.done(key) == {"c1"}
    assert db.done({**key, "budget": 3}) == set()  # another budget is another result


def test_montages_for_track_c(brain_set: Path, tmp_path: Path) -> None:
    case = sorted(brain_set.iterdir())[0]
    written = write_montages(case, tmp_path / "m")
    assert [p.name for p in written] == ["T1.png", "T1c.png", "T2.png", "FLAIR.png"]
    from PIL import Image

    assert Image.open(written[0]).size == (6 * 192, 4 * 192 + 24)
    assert json.loads((tmp_path / "m" / case.name / "montage.json").read_text())["images"][0] == "T1.png"
