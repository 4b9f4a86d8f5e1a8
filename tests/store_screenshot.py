"""The store approval dialog in docs/: a CT study opened from a private Orthanc, a question answered with a key
slice, and File → Store to PACS / Export showing exactly what would be written and where (over the window).

    xvfb-run -a python -m tests.store_screenshot docs
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tests.fake_openai import FakeOpenAI
from tests.reading_screenshots import _settle, _window


def store_dialog(app: object, out: Path, tmp: Path) -> None:
    """The window with the Store dialog drawn over its middle."""
    from PySide6.QtGui import QPainter

    from copilot.gui.store_dialog import StoreDialog
    from copilot.pacs.client import PacsClient
    from copilot.pacs.orthanc import LocalOrthanc
    from copilot.pacs.sample import write_ct_series
    from copilot.panel.store import plan_store
    from copilot.study.policies import conversation, model_settings

    with LocalOrthanc() as pacs:
        os.environ.update({"MEDCOPILOT_PACS_USER": pacs.user, "MEDCOPILOT_PACS_PASSWORD": pacs.password,
                           "MEDCOPILOT_PACS_CACHE": str(tmp / "cache")})  # fmt: skip
        datasets = write_ct_series(tmp / "ct")
        PacsClient(pacs.dicomweb).store(datasets, datasets[0].StudyInstanceUID)
        window = _window(app)
        assert window.open_path(f"{pacs.dicomweb}/studies/{datasets[0].StudyInstanceUID}")  # type: ignore[attr-defined]
        model = window.model  # type: ignore[attr-defined]
        fake = FakeOpenAI([{"content": "A bright rectangular block lies left of midline on the axial slice shown; "
                                       "no other focal finding.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: 15.0"}])  # fmt: skip
        try:
            policy = conversation(model_settings("openai:scripted-model", base_url=fake.base_url), model.case,
                                  model.session.kind)  # fmt: skip
            model.run_episode(policy, "Is there a focal abnormality on the axial slices?")
            while not model.wait(0.05):
                app.processEvents()  # type: ignore[attr-defined]
        finally:
            fake.stop()
        dialog = StoreDialog(plan_store(model), window)  # type: ignore[arg-type]
        dialog.show()
        _settle(app)
        picture = window.grab()  # type: ignore[attr-defined]
        painter = QPainter(picture)
        shown = dialog.grab()
        painter.drawPixmap((picture.width() - shown.width()) // 2, (picture.height() - shown.height()) // 2, shown)
        painter.end()
        picture.save(str(out / "gui_store_dialog.png"), None, 0)
        dialog.close()
        window.close()  # type: ignore[attr-defined]


def main(out: Path) -> int:
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MEDCOPILOT_SESSIONS"] = str(Path(tmp) / "sessions")
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")
        store_dialog(app, out, Path(tmp))
    print(out / "gui_store_dialog.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")))
