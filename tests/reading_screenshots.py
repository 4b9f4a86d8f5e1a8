"""The reading-room screenshots in docs/: a PET/CT conversation caught while the model's answer streams in, with
tokens and cost in the panel (the hanging protocol fused the PET over the CT), and a prior study side by side with
the current after its registration was approved. The model is the scripted service of the tests.

    xvfb-run -a python -m tests.reading_screenshots docs
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from tests.fake_openai import FakeOpenAI, tool
from tests.workstation_data import write_dicom_series

PRICE = {"openai:scripted-model": {"input_per_mtok": 2.5, "output_per_mtok": 10.0}}


def _settle(app: object, seconds: float = 0.6) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.02)


def _window(app: object) -> object:
    from copilot.gui.app import MainWindow

    window = MainWindow()
    window.quiet = window.no_dialogs = True
    window.resize(1500, 900)
    window.show()
    _settle(app, 0.3)
    return window


def petct_mid_stream(app: object, out: Path, tmp: Path) -> None:
    """The PET/CT study opened with both series, a question asked, the answer caught half written."""
    from copilot.cases.dicom_study import write_dicom_study
    from copilot.medflow import make_cases
    from copilot.study.policies import conversation, model_settings

    case = make_cases("lung_petct", 1, 4, tmp / "cases")[0]
    study = write_dicom_study(case, tmp / "petct_dicom")
    window = _window(app)
    assert window.open_path(study, series_spec="2,4")  # type: ignore[attr-defined]
    model = window.model  # type: ignore[attr-defined]
    answer = ("The most intense uptake is a rounded focus in the right upper lobe, about 18 mm across, with an SUV "
              "well above the mediastinal blood pool; no second focus is seen on the slices reviewed, and the "
              "hilar nodes look normal in size.\nEVIDENCE:\nRAS: [-92.6, -54.9, -0.1] hottest focus\nANSWER: A")
    fake = FakeOpenAI([
        {"content": "Looking at the fused axial slice through the hottest focus.",
         "tool_calls": [tool("jump", {"ras": [-92.6, -54.9, -0.1], "view": "red"})]},
        {"content": answer, "chunks": 24},
    ])  # fmt: skip
    reached, go_on = threading.Event(), threading.Event()
    stream = model._on_stream

    def held(piece: str) -> None:  # the worker waits half way so that the picture shows text still arriving
        stream(piece)
        if model.stream_pieces == 11:
            reached.set()
            go_on.wait(30)

    model._on_stream = held
    try:
        settings = model_settings("openai:scripted-model", base_url=fake.base_url, prices=PRICE)
        policy = conversation(settings, model.case, model.session.kind)
        model.run_episode(policy, "Where is the most intense uptake, and how large is it?")
        while not reached.wait(0.02):
            app.processEvents()  # type: ignore[attr-defined]
        _settle(app)
        window.grab().save(str(out / "gui_petct_streaming.png"), None, 0)  # type: ignore[attr-defined]
        go_on.set()
        while not model.wait(0.05):
            app.processEvents()  # type: ignore[attr-defined]
    finally:
        go_on.set()
        fake.stop()
        window.close()  # type: ignore[attr-defined]


def _head(shift: tuple[int, int, int], lesion_r: float) -> np.ndarray:
    """A head-like phantom (96×96×72 at 2 mm) with a bright lesion of radius `lesion_r` voxels, moved by `shift`."""
    k, j, i = np.mgrid[0:72, 0:96, 0:96]
    head = ((i - 48) / 40.0) ** 2 + ((j - 48) / 46.0) ** 2 + ((k - 36) / 34.0) ** 2 <= 1.0
    brain = ((i - 48) / 36.0) ** 2 + ((j - 48) / 42.0) ** 2 + ((k - 36) / 30.0) ** 2 <= 1.0
    ventricle = ((i - 48) / 6.0) ** 2 + ((j - 44) / 14.0) ** 2 + ((k - 38) / 8.0) ** 2 <= 1.0
    lesion = ((i - 62) ** 2 + (j - 36) ** 2 + (k - 44) ** 2) <= lesion_r**2
    data = np.where(head, 900, 0) + np.where(brain, -300, 0) + np.where(ventricle, -400, 0) + np.where(lesion, 700, 0)
    rng = np.random.default_rng(int(lesion_r * 10))
    data = (data + rng.normal(0, 20, data.shape) * head).astype(np.int16)
    return np.roll(data, shift=(shift[2], shift[1], shift[0]), axis=(0, 1, 2))


def prior_side_by_side(app: object, out: Path, tmp: Path) -> None:
    """This year's study beside last year's (the head placed differently, the lesion smaller), aligned."""
    from copilot.gui import reading

    write_dicom_series(tmp / "now", _head((0, 0, 0), 7.0), "2.25.3141592653589", "T2 FLAIR axial", 3)
    write_dicom_series(tmp / "prior", _head((4, -3, 2), 4.5), "2.25.2718281828459", "T2 FLAIR axial", 3)
    window = _window(app)
    assert window.open_path(tmp / "now")  # type: ignore[attr-defined]
    assert reading.open_prior(window, tmp / "prior", approve=True)
    model = window.model  # type: ignore[attr-defined]
    model.jump([-124.0, -72.0, 88.0])  # the lesion: the prior follows to the same anatomy
    _settle(app)
    window.grab().save(str(out / "gui_prior.png"), None, 0)  # type: ignore[attr-defined]
    window.close()  # type: ignore[attr-defined]


def main(out: Path) -> int:
    from PySide6.QtWidgets import QApplication

    os.environ.setdefault("MEDCOPILOT_SESSIONS", tempfile.mkdtemp())
    app = QApplication.instance() or QApplication(sys.argv)
    tmp = Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    petct_mid_stream(app, out, tmp)
    prior_side_by_side(app, out, tmp)
    for name in ("gui_petct_streaming.png", "gui_prior.png"):
        print(out / name, (out / name).stat().st_size)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")))
