"""Desktop start-up: time from the `medcopilot gui STUDY` command to its first line on the terminal, to the first
progress message in a window, to the study's first frame painted (its first image in the start-up window) and to
the viewer's panes painted with the study, for a DICOM folder, a NIfTI file, a slide and a PACS series by its
DICOMweb URL (a private local Orthanc, where `make sysdeps` installed one; cold and warm cache) (Qt offscreen); beside
the floor any Python desktop app stands on, measured in the same run: the interpreter's start, `import
PySide6.QtWidgets`, and a PySide6 window painted.

Each start runs in a fresh process with MEDCOPILOT_STARTUP_PROBE=1: the app then writes one stderr line per
start-up event ("medcopilot gui: startup <event> <seconds since the process started> cpu <CPU s>: <message>")
and quits once the viewer has painted the study. The times printed here are those of the lines' arrival, from
the moment the command was started (interpreter start-up included), so they are what a clinician waits; the
CPU seconds the process had used at its first frame are printed too (on a loaded machine they show what a quiet
one would wait). The load average is printed before and after. The studies are generated into a temporary
folder, deleted after.

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


def start(path: Path | str, home: Path, extra: dict[str, str] | None = None) -> dict[str, float]:
    """One start: seconds to each start-up event (the terminal line, the window's first message, the first frame)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen", "MEDCOPILOT_STARTUP_PROBE": "1",
           "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
           **(extra or {})}  # fmt: skip
    t0 = time.perf_counter()
    command = [sys.executable, "-m", "copilot.cli", "gui", str(path), "--trace-dir", str(home / "trace")]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen: dict[str, float] = {}
    cpu: dict[str, float] = {}
    watchdog = threading.Timer(120, proc.kill)  # the app stays open on an error: the probe's exit never comes
    watchdog.start()
    assert proc.stderr is not None
    for line in proc.stderr:
        now = time.perf_counter() - t0
        if "startup " in line:
            words = line.split("startup ", 1)[1].split()
            seen.setdefault(words[0], now)
            if len(words) > 3 and words[2] == "cpu":
                cpu.setdefault(words[0], float(words[3].rstrip(":")))
    proc.wait()
    watchdog.cancel()
    if "viewer" not in seen and "first-frame" in seen and not cpu:  # an older probe: its first frame was the viewer's
        seen["viewer"] = seen["first-frame"]
    if "viewer" not in seen or "first-frame" not in seen:
        raise RuntimeError(f"{path}: no first frame (exit {proc.returncode})")
    seen["first-frame cpu"] = cpu.get("first-frame", float("nan"))
    return seen


REFERENCES = {
    "interpreter start": "pass",
    "import PySide6.QtWidgets": "import PySide6.QtWidgets",
    "PySide6 window painted": (
        "import sys\nfrom PySide6.QtWidgets import QApplication, QLabel\napp = QApplication(sys.argv[:1])\n"
        "w = QLabel('x')\nw.show()\napp.processEvents()\n"
    ),
}


def reference(code: str) -> float:
    """Seconds from starting a fresh interpreter running `code` to its exit (Qt offscreen)."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank: the largest of up to 20 values)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(np.ceil(0.95 * len(ordered))) - 1))]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"


def pacs_rows(repeats: int, out: Path, events: tuple[str, ...]) -> None:
    """The same columns for a 120-slice CT series opened by its DICOMweb URL from a private local Orthanc: cold
    (an empty PACS cache: the series streamed as it is shown) and warm (the series already in the cache)."""
    from benchmarks.pacs_fetch import BenchOrthanc, ct_series
    from copilot.pacs.client import PacsClient
    from copilot.pacs.orthanc import missing

    if missing() is not None:
        print(f"PACS series: skipped: {missing()}")
        return
    with BenchOrthanc() as pacs:
        os.environ["MEDCOPILOT_PACS_USER"], os.environ["MEDCOPILOT_PACS_PASSWORD"] = pacs.user, pacs.password
        datasets = ct_series(120, 256)
        study, series = str(datasets[0].StudyInstanceUID), str(datasets[0].SeriesInstanceUID)
        for k in range(0, len(datasets), 40):
            PacsClient(pacs.dicomweb).store(datasets[k : k + 40], study)
        url = f"{pacs.dicomweb}/studies/{study}/series/{series}"
        warm = {"MEDCOPILOT_PACS_CACHE": str(out / "pacs-cache-warm")}
        start(url, out / "home-pacs-fill", warm)  # fills the warm cache (and Orthanc's own), untimed
        for label, caches in (("PACS series, cold cache", [{"MEDCOPILOT_PACS_CACHE": str(out / f"pacs-cache-{n}")}
                                                           for n in range(repeats)]),
                              ("PACS series, warm cache", [warm] * repeats)):  # fmt: skip
            runs = [start(url, out / f"home-pacs-{label[-10:-6]}-{n}", cache) for n, cache in enumerate(caches)]
            cols = [[r[event] for r in runs] for event in (*events, "first-frame cpu")]
            print(f"{label:26}" + "".join(f"{statistics.median(c):9.3f} / {p95(c):4.2f}" for c in cols))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ns = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="desktop_start_"))
    try:
        made = studies(out)
        print(f"load average {load()} on {os.cpu_count()} cores; median / p95 of {ns.repeats} starts, s")
        events = ("terminal", "message", "first-frame", "viewer")
        print(f"{'':26}" + "".join(f"{e:>16}" for e in ("terminal line", "window message", "first frame",
                                                          "viewer")) + f"{'CPU at 1st frame':>18}")  # fmt: skip
        for label, code in REFERENCES.items():
            times = [reference(code) for _ in range(ns.repeats)]
            print(f"{label:26}{statistics.median(times):9.3f} / {p95(times):4.2f}")
        for label, path in made.items():
            runs = [start(path, out / f"home-{label.split()[0]}-{n}") for n in range(ns.repeats)]
            cols = [[r[event] for r in runs] for event in (*events, "first-frame cpu")]
            print(f"{label:26}" + "".join(f"{statistics.median(c):9.3f} / {p95(c):4.2f}" for c in cols))
        pacs_rows(ns.repeats, out, events)
        print(f"load average {load()}")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
