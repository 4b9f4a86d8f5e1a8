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
    from copilot.medflow.bench_run import run_batch

    parser = argparse.ArgumentParser(prog="MedCopilot batch")
    parser.add_argument("--cases", required=True)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--track", default="A")
    parser.add_argument("--budget", type=int, default=20)
    ns = parser.parse_args(argv)
    # one episode at a time on slicer.mrmlScene (each session removes the previous one's nodes)
    rows = run_batch(
        ns.cases, ns.policy, Path(ns.out).resolve(), workers=1, track=ns.track, budget=ns.budget, backend="slicer"
    )
    for row in rows:
        print(f"{row['case_id']}: {row['status']} Task={row['task']:.2f} Strict={row['strict']:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    import slicer

    slicer.util.exit(code)
