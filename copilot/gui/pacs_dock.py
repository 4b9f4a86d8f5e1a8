"""The PACS browser dock: search a DICOMweb server (patient ID, modality, date) and open a study or series by
double-click; the window opens it like any URL (retrieved into the cache, origin traced)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDockWidget,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from copilot.pacs.auth import default_server
from copilot.pacs.fetch import DERIVED_RESULTS

URL_ROLE = Qt.ItemDataRole.UserRole


class PacsDock(QDockWidget):
    """Search fields, a Search button and the found studies with their series; double-click opens."""

    def __init__(self, parent: Any, open_url: Callable[[str], Any]) -> None:
        super().__init__("PACS", parent)
        self.open_url = open_url
        body = QWidget()
        layout = QVBoxLayout(body)
        form = QFormLayout()
        self.server = QLineEdit(default_server())
        self.server.setPlaceholderText("https://pacs.example.org/dicom-web")
        self.patient_id, self.modality, self.date = QLineEdit(), QLineEdit(), QLineEdit()
        self.date.setPlaceholderText("YYYYMMDD or YYYYMMDD-YYYYMMDD")
        for label, field in (("Server", self.server), ("Patient ID", self.patient_id), ("Modality", self.modality),
                             ("Date", self.date)):  # fmt: skip
            form.addRow(label, field)
            field.returnPressed.connect(self.search)
        layout.addLayout(form)
        self.search_button = QPushButton("Search")
        self.search_button.clicked.connect(self.search)
        layout.addWidget(self.search_button)
        self.results = QTreeWidget()
        self.results.setHeaderLabels(["Study / series", "Date", "Images"])
        self.results.itemDoubleClicked.connect(self._open)
        layout.addWidget(self.results, 1)
        self.status = QLabel("double-click a study or a series to open it")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.setWidget(body)

    def search(self) -> int:
        """Run the search (QIDO-RS) and list what was found; the number of studies (-1: refused)."""
        from copilot.pacs.client import PacsClient

        self.results.clear()
        try:
            studies = PacsClient(self.server.text().strip()).search(
                self.patient_id.text().strip() or None, self.modality.text().strip() or None,
                self.date.text().strip() or None,
            )  # fmt: skip
        except Exception as exc:  # an unreachable server, a refusal, a bad URL: shown, never raised
            self.status.setText(f"search failed: {getattr(exc, 'message', None) or exc}")
            return -1
        for study in studies:
            title = f"{study['patient_id'] or '—'}  {study['description'] or '(no description)'}"
            top = QTreeWidgetItem([title, str(study["date"] or ""), ""])
            top.setData(0, URL_ROLE, study["url"])
            for s in study["series"]:
                number = f"#{s['number']} " if s["number"] is not None else ""
                text = f"{number}{s['modality'] or '?'} {s['description'] or ''}".strip()
                derived = str(s["modality"] or "").upper() in DERIVED_RESULTS  # a SEG, SR, KO, PR: listed, never opened
                child = QTreeWidgetItem([f"derived result: {text}" if derived else text, "",
                                         str(s["instances"] if s["instances"] is not None else "")])  # fmt: skip
                child.setData(0, URL_ROLE, None if derived else s["url"])
                top.addChild(child)
            self.results.addTopLevelItem(top)
            top.setExpanded(True)
        self.status.setText(f"{len(studies)} stud{'y' if len(studies) == 1 else 'ies'} found")
        return len(studies)

    def _open(self, item: QTreeWidgetItem, column: int = 0) -> None:
        url = item.data(0, URL_ROLE)
        if url:
            self.status.setText("retrieving…")
            self.open_url(str(url))
            self.status.setText("opened")
