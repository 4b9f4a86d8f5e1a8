"""The stored report panel: a DICOM SR's findings and text listed (`copilot/panel/sr_view.py`); a click on a
finding moves every view there by the clinician's own audited `jump`. Opening a report is traced
(`derived_opened`), never sent to a model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QLabel, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from copilot.panel.sr_view import ReportItem, report_items, report_title


class ReportDock(QDockWidget):
    """A report's items, one a row; clicking one with a place jumps there."""

    def __init__(self, window: Any) -> None:
        super().__init__("Stored report", window)
        self.setMinimumWidth(340)  # a finding's line read whole
        self.win = window
        self.items: list[ReportItem] = []
        body = QWidget()
        layout = QVBoxLayout(body)
        self.heading = QLabel("")
        self.heading.setWordWrap(True)
        layout.addWidget(self.heading)
        self.list = QListWidget()
        self.list.itemClicked.connect(lambda item: self.go(self.list.row(item)))
        layout.addWidget(self.list, 1)
        self.setWidget(body)

    def show_report(self, path: Path) -> int:
        """List the report at `path` (ValueError when it is none); the number of items."""
        self.items = report_items(path)
        self.heading.setText(f"{report_title(path)} — click a finding to go there")
        self.list.clear()
        for item in self.items:
            row = QListWidgetItem(item.text)
            row.setToolTip(item.text)
            if item.ras is None:
                row.setFlags(row.flags() & ~Qt.ItemFlag.ItemIsSelectable)
            self.list.addItem(row)
        self.show()
        return len(self.items)

    def go(self, row: int) -> None:
        """Every view through the finding's place (the clinician's jump, traced like any)."""
        if not 0 <= row < len(self.items) or self.win.model is None:
            return
        ras = self.items[row].ras
        if ras is not None:
            out = self.win.model.jump([round(v, 4) for v in ras])
            if not out.ok:
                self.win.statusBar().showMessage(f"cannot go there: {(out.error or {}).get('message', '')}", 6000)


def open_report(window: Any, path: str | Path) -> int:
    """Open a stored report beside the study shown: its panel, and a `derived_opened` trace event. The number of
    items; a file that is no report is said in the status bar (-1)."""
    dock = getattr(window, "report_dock", None)
    if dock is None:
        dock = window.report_dock = ReportDock(window)
        window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
    try:
        n = dock.show_report(Path(path))
    except ValueError as exc:
        window.statusBar().showMessage(str(exc), 8000)
        return -1
    if window.model is not None:
        window.model.session.note("derived_opened", {"modality": "SR", "file": Path(path).name, "items": n})
    return n


def open_report_dialog(window: Any) -> None:
    """File → Open stored report (SR)…"""
    from PySide6.QtWidgets import QFileDialog

    start = str(window.model.session.trace_dir or "") if window.model is not None else ""
    path, _ = QFileDialog.getOpenFileName(window, "Stored report (DICOM SR)", start, "DICOM (*.dcm);;All files (*)")
    if path:
        open_report(window, path)
