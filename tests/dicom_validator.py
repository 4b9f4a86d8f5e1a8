"""DICOM files the tests write, checked by an independent validator: dicom3tools' `dciodvfy` (Debian package
`dicom3tools`, installed by `make sysdeps`). A file passes when dciodvfy reports no "Error" line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def dciodvfy_errors(path: Path) -> list[str]:
    """The lines dciodvfy reports as errors for one file."""
    exe = shutil.which("dciodvfy")
    assert exe, "dciodvfy is missing: install the Debian package dicom3tools (make sysdeps)"
    run = subprocess.run([exe, str(path)], capture_output=True, text=True, timeout=60, check=False)
    return [ln for ln in (run.stdout + run.stderr).splitlines() if ln.startswith("Error")]


def assert_valid_dicom(path: Path) -> None:
    """Fail with dciodvfy's own words when a written DICOM file does not validate."""
    errors = dciodvfy_errors(path)
    assert not errors, f"{path.name}: dciodvfy reports {len(errors)} error(s):\n" + "\n".join(errors)
