"""Headless batch evaluation inside Slicer: `Slicer --no-main-window --python-script batch.py -- ARGS`.

Runs `bench run` episodes with the `slicer` backend on Slicer's own scene (one episode at a time: one
scene), writing the same results database, traces and report as `medcopilot bench run --backend slicer`
does on slicer-core without the application. With `--no-main-window` Slicer has no slice views; the
backend draws with its own vtkMRMLSliceLogic pipelines, so nothing needs a screen. (Running the main
window under Xvfb also works and additionally shows Slicer's views updating.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    import slicer

    from copilot.batch import ResultsDB, run_episode
    from copilot.bench.report import write_report
    from copilot.cases.pack import find_cases
    from copilot.medflow.policies import make_policy
    from copilot.medflow.registry import report_columns

    parser = argparse.ArgumentParser(prog="MedCopilot batch")
    parser.add_argument("--cases", required=True)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--track", default="A")
    parser.add_argument("--budget", type=int, default=20)
    ns = parser.parse_args(argv)
    out = Path(ns.out).resolve()
    db = ResultsDB(out / "results.sqlite")
    done = db.done(ns.policy, ns.track)

    for case in find_cases(ns.cases):
        if case.case_id in done or case.kind != "radiology":
            continue
        slicer.mrmlScene.Clear(0)
        policy = make_policy(ns.policy)
        row = run_episode(str(case.root), ns.policy, str(out), ns.track, ns.budget, policy=policy, backend="slicer")
        db.insert(row)
        print(f"{case.case_id}: {row['status']} Task={row['task']:.2f} Strict={row['strict']:.2f}", flush=True)
    write_report(db.rows(), out / "report.html", report_columns())
    db.close()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    import slicer

    slicer.util.exit(code)
