"""The desktop's view of a PACS study while it arrives: the first slice painted over the view area as soon as it
lands and repainted as the others come, with how many have arrived, over the Qt-free `ProgressiveStudy`; the
study opens in the viewer (and the agent gets its tools) only once every instance is in the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QEventLoop, Qt
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QApplication, QLabel

from copilot.gui import startup
from copilot.pacs.progressive import ProgressiveStudy, SliceStack

REFRESH_S = 0.03  # the preview is looked at about 30 times a second


def paint(label: QLabel, stack: SliceStack, area: Any) -> bool:
    """The stack's slice on show, scaled into the view area and centred; False before the first slice."""
    pixels = stack.image()
    if pixels is None:
        return False
    rows, cols = pixels.shape
    qimage = QImage(pixels.data, cols, rows, pixels.strides[0], QImage.Format.Format_Grayscale8).copy()
    height = rows * stack.aspect
    scale = max(1, min(area.width(), area.height()) - 80) / max(cols, height)
    pixmap = QPixmap.fromImage(qimage).scaled(max(1, round(cols * scale)), max(1, round(height * scale)),
                                              Qt.AspectRatioMode.IgnoreAspectRatio,
                                              Qt.TransformationMode.SmoothTransformation)  # fmt: skip
    label.setPixmap(pixmap)
    label.adjustSize()
    label.move((area.width() - label.width()) // 2, (area.height() - label.height()) // 2)
    label.show()
    return True


def retrieve_showing(window: Any, url: str) -> Path:
    """Retrieve a DICOMweb study or series URL into the cache while its first series' slices show as they
    arrive (the retrieval the start-up began for it, when it did); the local study's path once complete (the
    retrieval's named refusal when it fails)."""
    study = startup.pacs_study(url) or ProgressiveStudy(url).start()
    startup.close_splash()  # the arriving slices show here from now on
    app = QApplication.instance()
    label = QLabel(window.area)
    label.setObjectName("pacs-arriving")
    label.hide()
    shown, logged = -1, False
    try:
        while not study.finished(REFRESH_S):
            stack = study.stack
            if stack is not None and stack.version != shown:
                shown = stack.version
                if paint(label, stack, window.area) and study.first_slice_s is not None and not logged:
                    logged = True
                    startup.log("pacs-first-slice", f"after {study.first_slice_s:.3f} s")
                window.progress(f"Retrieving from the PACS: {stack.caption()}")
                label.raise_()
            elif app is not None:
                app.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)
        return study.wait(0).path
    finally:
        label.hide()
        label.deleteLater()
