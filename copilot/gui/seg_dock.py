"""The stored segmentation panel: a DICOM SEG opened over the series it was made on (`copilot/panel/seg_overlay.py`),
its segments listed with their colours, names, volumes and the values inside, each switched on and off by its
check box; the slice panes paint the segments switched on. Opening and each switch are traced
(`derived_opened`, `segment_overlay`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QImage, QPainter, QPixmap
from PySide6.QtWidgets import QDockWidget, QLabel, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from copilot.panel.seg_overlay import Segment, overlay, read_seg


@dataclass
class SegShown:
    """What the panes paint: the segments, the volume whose grid they are on, a count bumped at each switch."""

    name: str
    segments: list[Segment]
    volume: Any
    version: int = 0


class SegDock(QDockWidget):
    """A segmentation's segments, one a checkable row."""

    def __init__(self, window: Any) -> None:
        super().__init__("Stored segmentation", window)
        self.setMinimumWidth(340)  # a finding's line read whole
        self.win = window
        body = QWidget()
        layout = QVBoxLayout(body)
        self.heading = QLabel("")
        self.heading.setWordWrap(True)
        layout.addWidget(self.heading)
        self.list = QListWidget()
        self.list.itemChanged.connect(self._switched)
        layout.addWidget(self.list, 1)
        self.setWidget(body)

    def show_segments(self, shown: SegShown) -> None:
        self.heading.setText(f"SEG {shown.name} on {shown.volume.name} — tick a segment to show it")
        self.list.blockSignals(True)
        self.list.clear()
        for seg in shown.segments:
            row = QListWidgetItem(seg.line())
            row.setToolTip(seg.line())
            swatch = QPixmap(14, 14)
            swatch.fill(QColor(*seg.colour))
            row.setIcon(QIcon(swatch))
            row.setFlags(row.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            row.setCheckState(Qt.CheckState.Checked if seg.shown else Qt.CheckState.Unchecked)
            self.list.addItem(row)
        self.list.blockSignals(False)
        self.show()

    def _switched(self, item: QListWidgetItem) -> None:
        shown = getattr(self.win, "seg_shown", None)
        row = self.list.row(item)
        if shown is None or not 0 <= row < len(shown.segments):
            return
        seg = shown.segments[row]
        seg.shown = item.checkState() == Qt.CheckState.Checked
        shown.version += 1
        if self.win.model is not None:
            self.win.model.session.note("segment_overlay", {"file": shown.name, "segment": seg.name,
                                                            "shown": seg.shown})  # fmt: skip
        for pane in self.win.panes.values():
            pane.update()


def open_seg(window: Any, path: str | Path) -> int:
    """Open a stored segmentation over the series shown: its panel, its segments painted, a `derived_opened` trace
    event. The number of segments; a file that is none, or of another series, is said in the status bar (-1)."""
    if window.model is None or window.screen_path is None or not window.screen_path.slice_views:
        return -1
    volume = (window.model.session.scene_data() or {}).get("volume")
    try:
        if volume is None:
            raise ValueError("no series is shown")
        segments = read_seg(path, volume)
    except ValueError as exc:
        window.statusBar().showMessage(str(exc), 8000)
        return -1
    window.seg_shown = SegShown(Path(path).name, segments, volume)
    dock = getattr(window, "seg_dock", None)
    if dock is None:
        dock = window.seg_dock = SegDock(window)
        window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
    dock.show_segments(window.seg_shown)
    window.model.session.note("derived_opened", {
        "modality": "SEG", "file": Path(path).name, "on": str(volume.name),
        "segments": [{"name": s.name, "voxels": int(s.stats["voxels"]), "ml": round(s.stats["ml"], 4)}
                     for s in segments]})  # fmt: skip
    for pane in window.panes.values():
        pane.update()
    return len(segments)


def open_seg_dialog(window: Any) -> None:
    """File → Open stored segmentation (SEG)…"""
    from PySide6.QtWidgets import QFileDialog

    start = str(window.model.session.trace_dir or "") if window.model is not None else ""
    path, _ = QFileDialog.getOpenFileName(window, "Stored segmentation (DICOM SEG)", start,
                                          "DICOM (*.dcm);;All files (*)")  # fmt: skip
    if path:
        open_seg(window, path)


def paint_segments(p: QPainter, pane: Any, frame: Any, s: float) -> None:
    """The segments switched on over a slice pane's picture (cached per picture and switch)."""
    shown = getattr(pane.win, "seg_shown", None)
    if shown is None or frame.image_to_ras is None:
        return
    key = (id(frame.pixels), id(shown), shown.version)
    cached = getattr(pane, "seg_picture", None)
    if cached is None or cached[0] != key:
        rgba = overlay(shown.segments, shown.volume, frame.image_to_ras, frame.size)
        image = None
        if rgba is not None:
            data = np.ascontiguousarray(rgba)
            image = QImage(data.data, data.shape[1], data.shape[0], data.shape[1] * 4,
                           QImage.Format.Format_RGBA8888).copy()  # fmt: skip
        cached = pane.seg_picture = (key, image)
    if cached[1] is not None:
        w, h = frame.size
        p.drawImage(QRectF(0, 0, w * s, h * s), cached[1])
