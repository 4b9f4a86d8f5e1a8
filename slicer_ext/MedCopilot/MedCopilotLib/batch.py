"""Headless batch evaluation inside Slicer: `Slicer --no-main-window --python-script batch.py -- ARGS`.

Runs `bench run` episodes with a `SlicerViewer` on Slicer's own scene (one episode at a time: one scene),
writing the same results database, traces and report as the embedded runner. With `--no-main-window`
Slicer has no layout manager and no slice views to capture; the backend renders from the volume nodes'
voxels with the engine's renderer, so nothing needs a screen. (Running the main window under Xvfb also
works and additionally shows Slicer's views updating.)
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
    from MedCopilotLib.slicer_viewer import SlicerViewer

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

    import copilot.runtime as runtime

    runtime.new_viewer = lambda kind: SlicerViewer() if kind == "radiology" else runtime.EmbeddedSlideViewer()
    for case in find_cases(ns.cases):
        if case.case_id in done or case.kind != "radiology":
            continue
        slicer.mrmlScene.Clear(0)
        row = run_episode(str(case.root), ns.policy, str(out), ns.track, ns.budget, policy=make_policy(ns.policy))
        db.insert(row)
        print(f"{case.case_id}: {row['status']} Task={row['task']:.2f} Strict={row['strict']:.2f}", flush=True)
    write_report(db.rows(), out / "report.html", report_columns())
    db.close()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    import slicer

    slicer.util.exit(code)
