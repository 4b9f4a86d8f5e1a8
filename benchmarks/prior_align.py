"""Aligning a prior CT to the current one: the quick alignment the reading room proposes against the full
Mattes MI registration (the Track B operator's, 100 iterations) on the same pair, with the error of each.

Run: `.venv/bin/python benchmarks/prior_align.py [--repeats 3]` (about a minute). A generated 256×256×40 CT
(0.9 × 0.9 × 3 mm: body, fat, organs, spine and ribs, noise; nothing committed) and its prior: the same body
rotated by a few degrees about each axis, shifted by about a centimetre, its noise drawn anew. Prints median /
95th percentile seconds of each, the ratio, the worst error over the body's corners against the known
transform (mm), and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from copilot.engine.ops.registration import align_prior, register
from copilot.engine.volume.image import Volume

SHAPE = (40, 256, 256)  # k, j, i
SPACING = (0.9, 0.9, 3.0)  # i, j, k mm
GOAL_S = 3.0


def rotation(ax: float, ay: float, az: float) -> np.ndarray:
    cx, sx, cy, sy, cz, sz = np.cos(ax), np.sin(ax), np.cos(ay), np.sin(ay), np.cos(az), np.sin(az)
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


def body(points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """CT numbers at RAS points (N×3, mm, body centred on the origin), noise added."""
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    hu = np.full(len(points), -1000.0)
    r = (x / 150) ** 2 + (y / 105) ** 2
    hu[r < 1] = -90.0  # fat
    hu[(x / 135) ** 2 + (y / 92) ** 2 < 1] = 40.0  # muscle and organs
    hu[((x - 45) / 42) ** 2 + ((y - 10) / 38) ** 2 + ((z - 10) / 50) ** 2 < 1] = 60.0  # liver-like
    hu[((x + 50) / 30) ** 2 + ((y + 5) / 26) ** 2 + ((z + 15) / 30) ** 2 < 1] = 25.0  # kidney-like
    hu[((x + 10) / 22) ** 2 + ((y - 30) / 18) ** 2 < 1] = -850.0  # bowel gas
    hu[(x / 16) ** 2 + ((y + 70) / 16) ** 2 < 1] = 700.0  # vertebral body
    ribs = (np.abs(r - 0.8) < 0.03) & (np.cos(z / 9.0) > 0.2)
    hu[ribs] = 600.0
    return hu + rng.normal(0, 15, len(points))


def ct(name: str, matrix: np.ndarray, shift: np.ndarray, seed: int) -> Volume:
    """The body sampled on a 256×256×40 grid centred on the origin, seen through `matrix` and `shift`."""
    k, j, i = np.mgrid[0 : SHAPE[0], 0 : SHAPE[1], 0 : SHAPE[2]].astype(np.float64)
    ijk_to_ras = np.diag([*SPACING, 1.0])
    ijk_to_ras[:3, 3] = -np.array(SPACING) * (np.array(SHAPE[::-1]) - 1) / 2
    ras = np.stack([i.ravel(), j.ravel(), k.ravel(), np.ones(i.size)]).T @ ijk_to_ras.T
    anatomy = (ras[:, :3] - shift) @ matrix  # where each grid point lies in the body's own frame
    data = body(anatomy, np.random.default_rng(seed)).reshape(SHAPE).astype(np.float32)
    return Volume(name, data, ijk_to_ras, modality="CT")


def corner_error(found: np.ndarray, truth: np.ndarray) -> float:
    """The largest distance (mm) between where two current→prior transforms send the body's box corners."""
    half = np.array(SPACING) * (np.array(SHAPE[::-1]) - 1) / 2
    corners = np.array([[sx, sy, sz, 1.0] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * [*half, 1]
    return float(np.max(np.linalg.norm((corners @ found.T - corners @ truth.T)[:, :3], axis=1)))


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    current = ct("current", np.eye(3), np.zeros(3), 1)
    turn, shift = rotation(np.radians(3.0), np.radians(-2.0), np.radians(4.0)), np.array([8.0, -6.0, 5.0])
    prior = ct("prior", turn, shift, 2)
    truth = np.eye(4)  # current RAS → prior RAS: the body point at p in the current lies at turn p + shift
    truth[:3, :3], truth[:3, 3] = turn, shift
    runs = {
        "quick (align_prior)": lambda: align_prior(current, prior).matrix_ras,
        "full (register, 100 it.)": lambda: register(current, prior, "rigid", max_iterations=100).matrix_ras,
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    errors: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():  # interleaved: load changes touch both alike
            t0 = time.perf_counter()
            matrix = run()
            times[name].append(time.perf_counter() - t0)
            errors[name].append(corner_error(matrix, truth))
    after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"prior alignment: two {SHAPE[2]}×{SHAPE[1]}×{SHAPE[0]} CTs ({SPACING[0]}×{SPACING[1]}×{SPACING[2]} mm), "
          f"prior turned 3°/−2°/4° and shifted 8/−6/5 mm; {args.repeats} repeats, {os.cpu_count()} cores")  # fmt: skip
    print(f"{'':26}{'seconds (med / p95)':>22}{'worst corner error mm':>24}")
    for name in runs:
        print(f"{name:26}{statistics.median(times[name]):12.2f} / {p95(times[name]):6.2f}{max(errors[name]):20.2f}")
    quick, full = (statistics.median(times[name]) for name in runs)
    met = quick <= GOAL_S and max(errors["quick (align_prior)"]) <= 2.0
    print(f"quick vs full: {full / quick:.1f}× faster (medians); goal ≤ {GOAL_S:g} s within 2 mm: "
          f"{'met' if met else 'missed'}")  # fmt: skip
    print(f"load average before {before}, after {after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
