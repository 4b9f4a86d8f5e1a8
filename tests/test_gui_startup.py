"""Desktop start-up: the `gui` command loads only what it needs before its window shows, a start-up message
comes before the viewer's modules load, and the probe reports the first painted frame of a study."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.workstation_data import nifti_file

ROOT = Path(__file__).resolve().parent.parent


def test_the_gui_command_parses_without_loading_the_benchmark_or_the_viewer() -> None:
    code = (
        "import sys, copilot.cli as cli\n"
        "ns = cli._gui_parser().parse_args(['gui', 'study.nii.gz', '--layout', 'one_up'])\n"
        "heavy = [m for m in sys.modules if m.startswith(('copilot.medflow', 'copilot.gui.app', 'pydicom', 'vtk'))]\n"
        "print(ns.path, ns.layout, heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.split()  # fmt: skip
    assert out == ["study.nii.gz", "one_up", "[]"]


def test_a_start_shows_progress_before_the_first_frame(tmp_path: Path) -> None:
    study = nifti_file(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen", "MEDCOPILOT_STARTUP_PROBE": "1",
           "MEDCOPILOT_SESSIONS": str(tmp_path / "sessions"), "HOME": str(tmp_path)}  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "copilot.cli", "gui", str(study)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [line.split("startup ", 1)[1].split()[:2] for line in proc.stderr.splitlines() if " startup " in line]
    names = [name for name, _ in events]
    assert names[:2] == ["terminal", "message"] and names[-1] == "viewer"  # the terminal line before Qt loads
    assert "progress" in names[1:-1] and any("Opening patient_t2.nii.gz" in line for line in proc.stderr.splitlines())
    loading = next(n for n, line in enumerate(proc.stderr.splitlines()) if "Loading the viewer" in line)
    framed = next(n for n, line in enumerate(proc.stderr.splitlines()) if " startup first-frame " in line)
    assert names.count("first-frame") == 1 and framed < loading  # the study's image before the viewer's modules
    times = [float(t.rstrip(":")) for _, t in events]
    assert times == sorted(times) and times[0] < times[-1]
