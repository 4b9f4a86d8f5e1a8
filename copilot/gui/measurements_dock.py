"""The measurements panel: the session's measurement table (each recorded measurement's numbers) and the tracked
lesions' history, long × short axes per time point (`copilot/tools/lesion_table.py`); it follows the evidence as
it changes (polled while shown: the agent records from its own thread)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from copilot.tools.lesion_table import History, lesion_history, measurement_rows


def _fill(table: QTableWidget, head: list[str], rows: list[list[str]]) -> None:
    table.clear()
    table.setColumnCount(len(head))
    table.setRowCount(len(rows))
    table.setHorizontalHeaderLabels(head)
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            item = QTableWidgetItem(text)
            item.setToolTip(text)  # the whole text where the column is too narrow
            table.setItem(r, c, item)
    table.resizeColumnsToContents()
    table.horizontalHeader().setStretchLastSection(True)


class MeasurementsDock(QDockWidget):
    """Two tables: this session's measurements, and each tracked lesion at each time point."""

    def __init__(self, window: Any) -> None:
        super().__init__("Measurements", window)
        self.setObjectName("measurements_dock")
        self.win = window
        self._seen: tuple[int, float] | None = None
        body = QWidget()
        layout = QVBoxLayout(body)
        layout.addWidget(QLabel("Measurements of this session"))
        self.table = QTableWidget(0, 3)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        layout.addWidget(self.table, 1)
        self.history_label = QLabel("Tracked lesions")
        layout.addWidget(self.history_label)
        self.history = QTableWidget(0, 1)
        self.history.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        layout.addWidget(self.history, 1)
        self.setWidget(body)
        self.setMinimumWidth(480)
        self.timer = QTimer(self, interval=1500)
        self.timer.timeout.connect(self.refresh_if_changed)
        self.timer.start()

    def _where(self) -> tuple[Path | None, Path | None]:
        model = self.win.model
        trace = model.session.trace_dir
        return (Path(trace) / "derived" if trace is not None else None), getattr(model.case, "root", None)

    def refresh_if_changed(self) -> None:
        """Refresh when the evidence or the lesion book changed since the last look (and the panel is shown)."""
        model = self.win.model
        if model is None or not self.isVisible():
            return
        derived, _ = self._where()
        book = derived / "lesions.json" if derived is not None else None
        seen = (len(model.evidence), book.stat().st_mtime if book is not None and book.is_file() else 0.0)
        if seen != self._seen:
            self.refresh()

    def refresh(self) -> History:
        """Fill both tables from the session as it stands; the history shown."""
        model = self.win.model
        if model is None:
            _fill(self.table, ["finding", "kind", "numbers"], [])
            return History([], [])
        evidence = list(model.evidence)
        derived, root = self._where()
        book = derived / "lesions.json" if derived is not None else None
        self._seen = (len(evidence), book.stat().st_mtime if book is not None and book.is_file() else 0.0)
        _fill(self.table, ["finding", "kind", "numbers"], [list(r) for r in measurement_rows(evidence)])
        history = lesion_history(derived, root, evidence)
        _fill(self.history, ["lesion", *history.time_points], [[name, *cells] for name, cells in history.lesions])
        self.history_label.setText("Tracked lesions" if history.lesions else
                                   "Tracked lesions: none yet (a labelled finding becomes one when a report is stored)")
        return history


def show_measurements(window: Any) -> MeasurementsDock:
    """The measurements panel beside the views (made on first use), filled."""
    dock = getattr(window, "measurements_dock", None)
    if dock is None:
        dock = window.measurements_dock = MeasurementsDock(window)
        window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
    dock.show()
    dock.refresh()
    return dock
