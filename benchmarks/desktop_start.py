"""Desktop start-up: time from the `medcopilot gui STUDY` command to its first line on the terminal, to the first
progress message in a window and to the first frame of the study painted, for a DICOM folder, a NIfTI file and a
slide (Qt offscreen).

Each start runs in a fresh process with MEDCOPILOT_STARTUP_PROBE=1: the app then writes one stderr line per
start-up event ("medcopilot gui: startup <event> <seconds since the process started>: <message>") and quits
once the first frame of the study is painted. The times printed here are those of the lines' arrival, from the
moment the command was started (interpreter start-up included), so they are what a clinician waits.
The studies are generated into a temporary folder, deleted after.

Run: `.venv/bin/python benchmarks/desktop_start.py [--repeats N]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import SimpleITK as sitk

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from copilot.cases.dicom_study import write_series
from copilot.cases.wsi import make_breast_case

ROOT = Path(__file__).resolve().parent.parent


def phantom(dims: tuple[int, int, int], spacing: float) -> sitk.Image:
    """A head-sized ellipsoid with a bright lesion, (i, j, k) voxels."""
    k, j, i = np.mgrid[0 : dims[2], 0 : dims[1], 0 : dims[0]].astype(np.float32)
    c = (np.array(dims, dtype=np.float32) - 1) / 2
    r = ((i - c[0]) / (dims[0] * 0.4)) ** 2 + ((j - c[1]) / (dims[1] * 0.45)) ** 2 + ((k - c[2]) / (dims[2] * 0.4)) ** 2
    data = np.where(r <= 1, 300.0 + 40.0 * np.sin(i / 5.0), 0.0)
    data[(i - c[0] * 1.3) ** 2 + (j - c[1]) ** 2 + (k - c[2]) ** 2 < 64] = 900.0
    image = sitk.GetImageFromArray(data.astype(np.float32))
    image.SetSpacing((spacing, spacing, spacing))
    return image


def studies(out: Path) -> dict[str, Path]:
    """A 256×256×120 MR DICOM folder, a 192×224×160 NIfTI file, a 4096×3072 slide."""
    dicom = out / "dicom"
    volume = sitk.Cast(phantom((256, 256, 120), 1.0), sitk.sitkInt16)
    write_series(volume, dicom, 3, "T1 axial", "1.2.826.0.1.3680043.2.1125.9")
    nifti = out / "t1.nii.gz"
    sitk.WriteImage(phantom((192, 224, 160), 1.0), str(nifti))
    case = make_breast_case(out / "slides", "slide", 5, size=(4096, 3072), mpp=0.5)
    return {"DICOM folder": dicom, "NIfTI file": nifti, "slide": case / "images" / "slide.tif"}


def start(path: Path, home: Path) -> dict[str, float]:
    """One start: seconds to each start-up event (the terminal line, the window's first message, the first frame)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen", "MEDCOPILOT_STARTUP_PROBE": "1",
           "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data")}  # fmt: skip
    t0 = time.perf_counter()
    command = [sys.executable, "-m", "copilot.cli", "gui", str(path), "--trace-dir", str(home / "trace")]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen: dict[str, float] = {}
    watchdog = threading.Timer(120, proc.kill)  # the app stays open on an error: the probe's exit never comes
    watchdog.start()
    assert proc.stderr is not None
    for line in proc.stderr:
        now = time.perf_counter() - t0
        if "startup " in line:
            event = line.split("startup ", 1)[1].split()[0]
            seen.setdefault(event, now)
            seen.setdefault("first line", now)
    proc.wait()
    watchdog.cancel()
    if "first-frame" not in seen:
        raise RuntimeError(f"{path.name}: no first frame (exit {proc.returncode})")
    return seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ns = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="desktop_start_"))
    try:
        made = studies(out)
        print(f"{'study':14} {'terminal line':>22} {'window message':>22} {'first frame':>22}   "
              f"(median / max of {ns.repeats} starts, s)")  # fmt: skip
        for label, path in made.items():
            runs = [start(path, out / f"home-{label.split()[0]}-{n}") for n in range(ns.repeats)]
            cols = [[r[event] for r in runs] for event in ("terminal", "message", "first-frame")]
            print(f"{label:14}" + "".join(f" {statistics.median(c):14.3f} / {max(c):5.3f}" for c in cols))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
