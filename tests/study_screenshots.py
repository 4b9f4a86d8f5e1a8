"""The study-mode screenshots in docs/: a DICOM series and a slide, each after a two-question conversation with
the evidence drawn, the model played by the scripted service of the tests.

    xvfb-run -a python -m tests.study_screenshots docs
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from tests.fake_openai import FakeOpenAI, tool
from tests.workstation_data import write_dicom_series


def phantom_series(root: Path) -> tuple[Path, list[float]]:
    """A 72-slice head-like phantom (2 mm) with a bright lesion; returns the folder and the lesion's RAS."""
    k, j, i = np.mgrid[0:72, 0:96, 0:96]
    head = ((i - 48) / 40.0) ** 2 + ((j - 48) / 46.0) ** 2 + ((k - 36) / 34.0) ** 2 <= 1.0
    brain = ((i - 48) / 36.0) ** 2 + ((j - 48) / 42.0) ** 2 + ((k - 36) / 30.0) ** 2 <= 1.0
    lesion = ((i - 62) / 7.0) ** 2 + ((j - 36) / 6.0) ** 2 + ((k - 44) / 5.0) ** 2 <= 1.0
    data = np.where(head, 900, 0) + np.where(brain, -300, 0) + np.where(lesion, 700, 0)
    rng = np.random.default_rng(1)
    data = (data + rng.normal(0, 25, data.shape) * head).astype(np.int16)
    folder = root / "study"
    write_dicom_series(folder, data, "2.25.1234567890123", "T2 FLAIR axial", 3)
    ras = [-2.0 * 62, -2.0 * 36, 2.0 * 44]  # LPS voxel axes at 2 mm from the origin
    return folder, ras


def main(out: Path) -> int:
    from copilot.gui.app import main as gui_main
    from copilot.medflow import make_cases

    os.environ.setdefault("MEDCOPILOT_SESSIONS", tempfile.mkdtemp())
    tmp = Path(tempfile.mkdtemp())
    folder, (r, a, s) = phantom_series(tmp)
    fake = FakeOpenAI([
        {"content": "Looking at the axial slice through the bright area.",
         "tool_calls": [tool("set_slice_offset", {"view": "red", "offset": s})]},
        {"tool_calls": [tool("window_preset", {"preset": "mr_t2_flair", "view": "all"})]},
        {"content": f"A round hyperintense focus of about 12 mm lies in the left posterior region.\nEVIDENCE:\n"
                    f"KEY_SLICE_AXIAL_MM: {s}\nRAS: [{r}, {a}, {s}] hyperintense focus\n"
                    f"DISTANCE_MM: [{r}, {a - 6}, {s}] -> [{r}, {a + 6}, {s}] extent"},
        {"content": "No other focus is seen on the slices reviewed.\nEVIDENCE:\n"
                    f"RAS: [{r}, {a}, {s}] hyperintense focus"},
    ])  # fmt: skip
    try:
        rc = gui_main(str(folder), str(out / "study_dicom.png"), asks=["Is there a focal lesion?", "Any other one?"],
                      base_url=fake.base_url, cursor=[r, a, s])  # fmt: skip
    finally:
        fake.stop()
    case = make_cases("breast_wsi", 1, 5, tmp / "cases", slide_size=(2048, 1536), mpp=1.0)[0]
    slide = next((case / "images").iterdir())
    fake = FakeOpenAI([
        {"tool_calls": [tool("zoom", {"direction": "in", "amount": 2})]},
        {"content": "The densest cellular area is in the upper middle of the section.\nEVIDENCE:\n"
                    "WSI: [1100, 600] dense cellular area\nWSI: [700, 900] second area"},
        {"content": "At this magnification no mitoses can be told apart.\nEVIDENCE:\nWSI: [1100, 600] dense area"},
    ])  # fmt: skip
    try:
        rc |= gui_main(str(slide), str(out / "study_slide.jpg"), asks=["Where is it most cellular?", "Mitoses?"],
                       base_url=fake.base_url, cursor=[1100.0, 600.0])  # fmt: skip
    finally:
        fake.stop()
    return rc


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")))
