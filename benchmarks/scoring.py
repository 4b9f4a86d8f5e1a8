"""Scoring throughput (≥ 1,000 answers per module, masks/annotations loaded for every answer as a fresh
scorer would) and the time to make one case pack of each module at its default size.

Run: `.venv/bin/python benchmarks/scoring.py [--answers 1000]`. The alternative measured in the same run
is the obvious mask handling: a float volume and a scan of every voxel.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from copilot.bench.scoring.scorers import Truth
from copilot.cases.pack import load_case
from copilot.engine.volume.loading import load_volume
from copilot.medflow import make_case, modules, score_case

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.oracle import perfect_evidence, perfect_response  # perfect answers built from hidden/


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--answers", type=int, default=1000)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("case pack generation (default sizes):")
        cases = {}
        for module in modules():
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
        # the obvious alternative for the mask rules: load the mask as a float volume, scan every voxel
        brain = cases["brain_mri"]
        slices, ras = perfect_evidence(brain)
        t0 = time.perf_counter()
        for _ in range(100):
            truth = Truth(load_case(brain))
            all(truth.slice_in_extent(axis, v) for axis, v in slices.items()) and truth.ras_hit(ras)
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(100):
            vol = load_volume(brain / "hidden" / "mask.nii.gz")
            vox = np.argwhere(vol.data > 0)[:, ::-1]
            for axis, v in slices.items():
                row = "RAS".index(axis)
                c = vox @ vol.ijk_to_ras[row, :3] + vol.ijk_to_ras[row, 3]
                bool(c.min() - 0.5 <= v <= c.max() + 0.5)
        naive = time.perf_counter() - t0
        print(
            f"brain mask rules x100: {ours:.2f} s; float volume + full voxel scan {naive:.2f} s "
            f"(ratio {naive / ours:.1f}x)"
        )


if __name__ == "__main__":
    main()
