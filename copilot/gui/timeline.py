"""The replay timeline dock: a scrubber over a trace's calls; the views show the scene after the selected call,
next to the images the trace recorded for it (what the agent saw)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import QDockWidget, QHBoxLayout, QLabel, QListWidget, QSlider, QVBoxLayout, QWidget

from copilot.panel.timeline import TraceTimeline


class ReplayDock(QDockWidget):
    """Timeline slider, list of calls, verification status and the recorded images of the current call."""

    def __init__(self, window: Any, timeline: TraceTimeline) -> None:
        super().__init__("Replay timeline", window)
        self.setObjectName("replay_dock")
        self.win, self.timeline = window, timeline
        body = QWidget()
        outer = QVBoxLayout(body)
        top = QHBoxLayout()
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, max(0, len(timeline.steps) - 1))
        self.slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        self.slider.setTickInterval(1)
        self.position = QLabel()
        self.position.setMinimumWidth(420)
        top.addWidget(QLabel("Call"))
        top.addWidget(self.slider, 1)
        top.addWidget(self.position)
        outer.addLayout(top)
        row = QHBoxLayout()
        self.calls = QListWidget()
        self.calls.addItems([s.title for s in timeline.steps])
        self.calls.setMaximumHeight(130)
        row.addWidget(self.calls, 2)
        self.recorded = QLabel()
        self.recorded.setMinimumSize(130, 130)
        self.recorded.setToolTip("the image this call returned, as the trace recorded it")
        row.addWidget(self.recorded)
        outer.addLayout(row)
        self.setWidget(body)
        self.slider.valueChanged.connect(self.seek)
        self.calls.currentRowChanged.connect(self._row_chosen)

    def _row_chosen(self, row: int) -> None:
        if row >= 0:
            self.slider.setValue(row)

    def seek(self, index: int) -> None:
        """Show the scene after call `index`."""
        step = self.timeline.seek(index)
        if self.slider.value() != self.timeline.position:
            self.slider.setValue(self.timeline.position)
        if self.calls.currentRow() != self.timeline.position:
            self.calls.setCurrentRow(self.timeline.position)
        verdict = "matches the trace" if step.matches else "DIFFERS from the trace"
        self.position.setText(f"{index + 1}/{len(self.timeline.steps)}  [{step.actor}] {step.handler} — {verdict}")
        self.position.setToolTip(str(step.args))
        pix = QPixmap()
        if step.artifacts and step.artifacts[-1].is_file():
            pix.load(str(step.artifacts[-1]))
            self.recorded.setPixmap(pix.scaled(130, 130, Qt.AspectRatioMode.KeepAspectRatio))
        else:
            self.recorded.setText("(no image)")
        if self.win.model is not None:
            self.win.model.crosshair = None
        if self.win.screen_path is not None:
            self.win.screen_path.sync()
        self.win.refresh()

    def refresh(self, *_: Any) -> None:
        pass
