"""A small benchmark run that fills every table of the report, then screenshots of the report and two episode
pages in headless Chromium (docs/bench_report.png, docs/bench_episode_*.png).

    python -m benchmarks.bench_report_demo OUT [--docs docs]

Two cases per module (small sizes); the offline `baseline` under both protocols and at budgets 20 and 5,
`prior` with two repeats, and Track C answers (the baseline's own responses, scored by `bench score`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from copilot.medflow import make_cases
from copilot.medflow.bench_run import run_batch
from copilot.medflow.runs import read_results

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--no-first-run", "--disable-component-update", "--disable-sync"]  # fmt: skip


def build(out: Path) -> Path:
    cases = out / "cases"
    if not cases.exists():
        for module, spacing in (("longitudinal_mri", 6.0), ("brain_mri", 4.0), ("lung_petct", 6.0)):
            make_cases(module, 2, 1, cases, spacing=spacing)
        for module in ("breast_wsi", "lymph_node_wsi"):
            make_cases(module, 2, 1, cases, slide_size=(1024, 768), mpp=4.0)
    run = out / "run"
    run_batch(cases, "baseline", run, workers=2, progress=None)
    run_batch(cases, "baseline", run, workers=2, progress=None, protocol="paper")
    run_batch(cases, "baseline", run, workers=2, progress=None, budget=5)
    run_batch(cases, "prior", run, workers=2, progress=None, repeats=2)
    answers = out / "baseline.jsonl"
    rows = [r for r in read_results(run / "results.sqlite") if r["policy"] == "baseline" and r["budget"] == 20]
    answers.write_text("".join(json.dumps({"case_id": r["case_id"], "response": r["response"]}) + "\n"
                               for r in rows if r["protocol"] == "harness"))  # fmt: skip
    score = ["bench", "score", "--cases", str(cases), "--answers", str(answers), "--out", str(run)]
    score += ["--model", "baseline"]
    subprocess.run([sys.executable, "-m", "copilot.cli", *score], check=True, capture_output=True)
    return run


def screenshot(url: str, shot: Path, profile: Path, height: int) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (make installs it)")
    subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}",
                    f"--window-size=1400,{height}", url], check=True, capture_output=True, timeout=180)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--docs", default="docs")
    ns = ap.parse_args()
    out, docs = Path(ns.out).resolve(), Path(ns.docs)
    run = build(out)
    rows = read_results(run / "results.sqlite")
    screenshot((run / "report.html").as_uri(), docs / "bench_report.png", out / "profile", 2400)
    picks = [next(r for r in rows if r["module"] == m and r["policy"] == "baseline" and r["protocol"] == "paper")
             for m in ("lung_petct", "lymph_node_wsi")]  # fmt: skip
    for r in picks:
        page = run / r["trace_dir"] / "episode.html"
        screenshot(page.as_uri(), docs / f"bench_episode_{r['module']}.png", out / "profile", 2000)
    print(f"{len(rows)} rows; report {run / 'report.html'}")


if __name__ == "__main__":
    main()
