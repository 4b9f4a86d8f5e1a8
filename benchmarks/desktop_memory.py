"""Peak memory on the desktop path: `medcopilot gui` opening a gzip NIfTI whose voxels sit exactly at the volume
budget (`MAX_VOXEL_BYTES`, 1 GiB of float32), against the same app on a tiny volume (the process baseline) and the
volume loader alone in a bare interpreter, each measured in the same run.

Run: `.venv/bin/python benchmarks/desktop_memory.py` (about a minute; Qt offscreen, the app started with the
start-up probe, so it quits once the viewer has painted the study). The files are generated (zeros: the budget
volume is a few MiB compressed) into a temporary folder, deleted after. Prints each process's peak resident set
(the kernel's rusage of it as a child), the voxel bytes, the ratio of the app's peak
less its baseline to the voxel bytes (goal ≤ 1.5), and the load average before and after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nibabel as nib
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from copilot.engine.volume.headers import MAX_VOXEL_BYTES

ROOT = Path(__file__).resolve().parent.parent

GOAL = 1.5


WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode\n"
    "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)  # its one child's peak, in KiB


def peak_mb(command: list[str], env: dict[str, str]) -> float:
    """The peak resident set of a process in MB (the rusage of the only child of a small wrapper)."""
    done = subprocess.run([sys.executable, "-c", WRAPPER, *command], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    code, kib = done.stdout.split()
    if code != "0":
        raise RuntimeError(f"{' '.join(command[2:4])} exited {code}")
    return int(kib) * 1024 / 1e6


def volume(path: Path, shape: tuple[int, int, int]) -> int:
    """A float32 NIfTI of zeros (its voxel bytes)."""
    nib.save(nib.Nifti1Image(np.zeros(shape, np.float32), np.eye(4)), str(path))
    return int(np.prod(shape)) * 4


def main() -> int:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out = Path(tempfile.mkdtemp(prefix="desktop_memory_"))
    try:
        tiny, big = out / "tiny.nii.gz", out / "budget.nii.gz"
        volume(tiny, (16, 16, 16))
        side = round((MAX_VOXEL_BYTES / 4 / 256) ** 0.5)
        voxel_bytes = volume(big, (side, side, 256))
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "MEDCOPILOT_STARTUP_PROBE": "1", "HOME": str(out),
               "XDG_CONFIG_HOME": str(out / "config"), "XDG_DATA_HOME": str(out / "data"),
               "PYTHONPATH": str(ROOT)}  # fmt: skip

        def gui(path: Path, name: str) -> list[str]:
            return [sys.executable, "-m", "copilot.cli", "gui", str(path), "--trace-dir", str(out / name)]

        loader = [sys.executable, "-c", "import sys\nfrom copilot.engine.volume.loading import load_volume\n"
                  f"load_volume({str(big)!r})"]  # fmt: skip
        baseline = peak_mb(gui(tiny, "t0"), env)
        alone = peak_mb(loader, env)
        app = peak_mb(gui(big, "t1"), env)
        mb = voxel_bytes / 1e6
        print(f"desktop memory: a {big.stat().st_size / 1e6:.1f} MB gzip NIfTI of {mb:.0f} MB float32 voxels "
              f"({side}×{side}×256, the budget), {os.cpu_count()} cores")  # fmt: skip
        print(f"{'':38}{'peak MB':>10}{'× voxel bytes':>16}")
        print(f"{'gui on a 16³ volume (baseline)':38}{baseline:10.0f}")
        print(f"{'load_volume alone (bare interpreter)':38}{alone:10.0f}{alone / mb:16.2f}")
        print(f"{'gui on the budget volume':38}{app:10.0f}{app / mb:16.2f}")
        ratio = (app - baseline) / mb
        verdict = "met" if ratio <= GOAL else "missed"
        print(f"gui less its baseline: {ratio:.2f}× the voxel bytes (goal ≤ {GOAL}: {verdict})")
        print(f"load average before {load}, after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
