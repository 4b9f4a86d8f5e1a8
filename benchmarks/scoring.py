"""Scoring throughput (≥ 1,000 answers per module, masks/annotations loaded for every answer as a fresh
scorer would) and the time to make one case pack of each module at its default size.

Run: `.venv/bin/python benchmarks/scoring.py [--answers 1000]`. The alternative measured in the same run
is a naive scorer that reloads the case folder and re-parses the whole answers file per case.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from copilot.bench.score_cli import find_cases, read_answers, score_answers
from copilot.bench.scoring import score_case
from copilot.cases.make import make_case

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.oracle import perfect_response

MODULES = ("brain_mri", "longitudinal_mri", "lung_petct", "breast_wsi", "lymph_node_wsi")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--answers", type=int, default=1000)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("case pack generation (default sizes):")
        cases = {}
        for module in MODULES:
            t0 = time.perf_counter()
            cases[module] = make_case(module, root / "cases", f"{module}_bench", seed=3)
            print(f"  {module:<18} {time.perf_counter() - t0:6.1f} s")
        print(f"scoring {ns.answers} answers per module (mask/annotation loaded per answer):")
        for module, case in cases.items():
            response = perfect_response(case)
            t0 = time.perf_counter()
            for _ in range(ns.answers):
                score_case(case, response)
            dt = time.perf_counter() - t0
            print(f"  {module:<18} {ns.answers / dt:8.0f} cases/s ({dt:5.2f} s for {ns.answers})")
        # the whole answers-file path, against a naive per-case re-read of the answers file
        answers = root / "answers.jsonl"
        with answers.open("w") as fh:
            for case in cases.values():
                fh.write(json.dumps({"case_id": case.name, "response": perfect_response(case)}) + "\n")
        t0 = time.perf_counter()
        for _ in range(50):
            score_answers(find_cases(root / "cases"), read_answers(answers))
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(50):
            for case in find_cases(root / "cases"):
                score_case(case, read_answers(answers)[case.case_id])
        naive = time.perf_counter() - t0
        print(
            f"answers file, 5 cases x 50 rounds: {ours:.2f} s; naive re-read per case {naive:.2f} s "
            f"(ratio {naive / ours:.2f}x)"
        )


if __name__ == "__main__":
    main()
