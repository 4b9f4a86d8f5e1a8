"""Per-handler latency of the `slicer` backend (Slicer's MRML scene and slice logics, slicer-core) against
the embedded engine, measured in the same run through `Session.call` (validation, execution, 512² render,
PNG encoding, state snapshot): a 512² render (`observe`), `set_slice_offset` and `fusion`, on the 1 mm MNI
T1 template (197×233×189), axis-aligned and oblique, plus a CT+PET-like pair for fusion.

Run: `.venv/bin/python benchmarks/slicer_backend.py` (or `make bench`). Prints median / 95th percentile in
ms per backend and the ratio slicer/embedded (> 1: the slicer backend is slower).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.render import rotated, timed
from copilot.cases.brain import TEMPLATE_FILES, template_dir
from copilot.engine.volume.image import Volume, volume_from_sitk
from copilot.engine.volume.viewer import EmbeddedVolumeViewer
from copilot.runtime import new_session
from copilot.session import Session

BACKENDS = ("embedded", "slicer")


def make_viewer(backend: str) -> Any:
    if backend == "embedded":
        return EmbeddedVolumeViewer()
    from copilot.slicer_backend import new_slicer_viewer

    return new_slicer_viewer()


def session_with(backend: str, volumes: list[Volume]) -> Session:
    """A session whose viewer shows `volumes` (the first as background), views fitted at 512²."""
    viewer = make_viewer(backend)
    ids = [viewer.add_volume(v) for v in volumes]
    viewer.recover_standard_views(ids[0])  # fitted for 512² views (both backends' default size)
    return new_session("radiology", viewer=viewer)


def cases(t1: Volume) -> dict[str, list[Volume]]:
    ct = Volume("CT", t1.data * 2.0 - 500.0, t1.ijk_to_ras, modality="CT")
    pet = Volume("PET", np.clip(t1.data - 60.0, 0, None) / 20.0, t1.ijk_to_ras, modality="PT")
    return {"axis": [t1], "oblique": [rotated(t1, 0.35, 0.26)], "ct+pet": [ct, pet]}


def calls(label: str) -> dict[str, Callable[[Session, int], Any]]:
    """The handler calls timed on a case (n: the repeat index, so offsets change every call)."""
    if label == "ct+pet":
        return {
            "fusion red 512²": lambda s, n: s.call(
                "fusion",
                {
                    "background_volume_ref": "CT",
                    "foreground_volume_ref": "PET",
                    "foreground_opacity": 0.3 + 0.01 * (n % 40),
                    "view": "red",
                    "size": 512,
                },
            )
        }
    return {
        "observe red 512²": lambda s, n: s.call("observe", {"view": "red", "size": 512}),
        "observe green 512²": lambda s, n: s.call("observe", {"view": "green", "size": 512}),
        "set_slice_offset red 512²": lambda s, n: s.call(
            "set_slice_offset", {"view": "red", "offset": -30.0 + 0.5 * (n % 80), "size": 512}
        ),
        "set_slice_offset yellow 512²": lambda s, n: s.call(
            "set_slice_offset", {"view": "yellow", "offset": -20.0 + 0.5 * (n % 80), "size": 512}
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=30)
    ns = parser.parse_args()
    t1 = volume_from_sitk(sitk.ReadImage(str(template_dir() / TEMPLATE_FILES["t1"]), sitk.sitkFloat32), "T1")
    print(f"volume {t1.dimensions} at {t1.spacing} mm; {ns.repeats} calls per row; median / p95 ms")
    print(f"{'case':8} {'handler':30} {'embedded':>17} {'slicer':>17} {'slicer/embedded':>16}")
    for label, volumes in cases(t1).items():
        sessions = {b: session_with(b, volumes) for b in BACKENDS}
        for name, call in calls(label).items():
            figures = {}
            for backend, session in sessions.items():

                def run(n: int, session: Session = session, call: Callable[[Session, int], Any] = call) -> None:
                    assert call(session, n).ok

                figures[backend] = timed(run, ns.repeats)
            (em, ep), (sm, sp) = figures["embedded"], figures["slicer"]
            print(f"{label:8} {name:30} {em:7.1f} / {ep:7.1f} {sm:7.1f} / {sp:7.1f} {sm / em:16.2f}")


if __name__ == "__main__":
    main()
