"""DICOM files the tests write, checked by an independent validator: dicom3tools' `dciodvfy` (Debian package
`dicom3tools`, installed by `make sysdeps`). A file passes when dciodvfy reports no "Error" line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any


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


def export_bright_seg(session: Any, volume: Any, trace: Path, percentile: float, size: int) -> Any:
    """Threshold a volume's brightest voxels (above `percentile`) into a segment, export it as a DICOM SEG into the
    trace's `derived/` folder, check it with dciodvfy, and return it read by highdicom."""
    import highdicom as hd
    import numpy as np

    hi = float(np.percentile(volume.data, percentile))
    args = {"volume": volume.name, "output_segment": "bright", "lower": hi, "upper": 1e6, "size": size}
    assert session.call("segment_threshold", args).ok
    out = session.call("export_dicom_seg", {"segment": "bright", "output_name": "seg"})
    assert out.ok, out.error
    path = trace / "derived" / "seg.dcm"
    assert_valid_dicom(path)
    return hd.seg.segread(path)
