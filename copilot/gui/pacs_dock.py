"""The PACS browser dock: the search of `pacs search` (patient name as people type it, patient ID, accession,
description, modality, dates, a page at a time) on a DICOMweb server, the studies listed with the patient's name
and the study date in full, their series below; a double-click opens a study or series like any URL (retrieved
into the cache, origin traced)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDockWidget,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from copilot.pacs.auth import default_server
from copilot.pacs.cli import summary_line
from copilot.pacs.fetch import DERIVED_RESULTS
from copilot.pacs.patient import dicom_date, person_name

URL_ROLE = Qt.ItemDataRole.UserRole
COLUMNS = ["Patient · study / series", "Date", "Images", "Patient ID", "Accession"]


class PacsDock(QDockWidget):
    """Search fields, Search / previous / next page, and the found studies with their series; double-click opens."""

    def __init__(self, parent: Any, open_url: Callable[[str], Any]) -> None:
        super().__init__("PACS", parent)
        self.open_url = open_url
        self.offset, self.shown = 0, 0  # the page listed: where it starts, how many studies
        body = QWidget()
        layout = QVBoxLayout(body)
        form = QFormLayout()
        self.server = QLineEdit(default_server())
        self.server.setPlaceholderText("https://pacs.example.org/dicom-web")
        self.patient_name, self.patient_id, self.accession = QLineEdit(), QLineEdit(), QLineEdit()
        self.description, self.modality, self.date = QLineEdit(), QLineEdit(), QLineEdit()
        self.patient_name.setPlaceholderText("Family, Given · Given Family · Family^Given · Fam*")
        self.description.setPlaceholderText("words of the study description")
        self.date.setPlaceholderText("YYYY-MM-DD, or a range: 2024-01-01-2024-06-30")
        self.limit = QSpinBox()
        self.limit.setRange(1, 1000)
        self.limit.setValue(50)
        self.limit.setSuffix(" studies a page")
        fields = (("Server", self.server), ("Patient name", self.patient_name), ("Patient ID", self.patient_id),
                  ("Accession", self.accession), ("Description", self.description), ("Modality", self.modality),
                  ("Date", self.date))  # fmt: skip
        for label, field in fields:
            form.addRow(label, field)
            field.returnPressed.connect(self.search)
        form.addRow("Page", self.limit)
        layout.addLayout(form)
        row = QHBoxLayout()
        self.search_button, self.previous_button, self.next_button = (QPushButton("Search"), QPushButton("◀ Previous"),
                                                                      QPushButton("Next ▶"))  # fmt: skip
        self.search_button.clicked.connect(self.search)
        self.previous_button.clicked.connect(lambda: self.search(max(0, self.offset - self.limit.value())))
        self.next_button.clicked.connect(lambda: self.search(self.offset + self.shown))
        for button in (self.search_button, self.previous_button, self.next_button):
            row.addWidget(button)
        layout.addLayout(row)
        self._pages(more=False)
        self.results = QTreeWidget()
        self.results.setHeaderLabels(COLUMNS)
        self.results.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)  # rows never truncated
        self.results.header().setStretchLastSection(False)
        self.results.itemDoubleClicked.connect(self._open)
        layout.addWidget(self.results, 1)
        self.status = QLabel("double-click a study or a series to open it")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.setWidget(body)

    def _pages(self, more: bool) -> None:
        self.previous_button.setEnabled(self.offset > 0)
        self.next_button.setEnabled(more)

    def query(self) -> dict[str, Any]:
        """The filters typed, as `PacsClient.search_page` takes them (empty fields left out)."""
        def text(field: QLineEdit) -> str | None:
            return field.text().strip() or None

        return {"patient_id": text(self.patient_id), "modality": text(self.modality), "date": text(self.date),
                "patient_name": text(self.patient_name), "accession": text(self.accession),
                "description": text(self.description)}  # fmt: skip

    def search(self, offset: int | bool = 0) -> int:
        """Run the search (QIDO-RS) from `offset` and list the page found; the number of studies (-1: refused)."""
        from copilot.pacs.client import PacsClient

        offset = 0 if isinstance(offset, bool) else int(offset)  # a button's `checked` is no offset
        self.results.clear()
        q = self.query()
        try:
            page = PacsClient(self.server.text().strip()).search_page(
                q.pop("patient_id"), q.pop("modality"), q.pop("date"), self.limit.value(), offset, **q)
        except Exception as exc:  # an unreachable server, a refusal, a bad URL: shown, never raised
            self.status.setText(f"search failed: {getattr(exc, 'message', None) or exc}")
            self.offset, self.shown = 0, 0
            self._pages(more=False)
            return -1
        for study in page.studies:
            self.results.addTopLevelItem(study_item(study))
        self.offset, self.shown = page.offset, len(page.studies)
        self._pages(page.more)
        shown = len(page.studies)
        of = f" of {page.total}" if page.total is not None else ""
        self.status.setText(f"studies {offset + 1}–{offset + shown}{of}; more match: Next ▶" if page.more
                            else summary_line(shown, page.offset, False, None))  # fmt: skip
        return len(page.studies)

    def _open(self, item: QTreeWidgetItem, column: int = 0) -> None:
        url = item.data(0, URL_ROLE)
        if url:
            self.status.setText("retrieving…")
            self.open_url(str(url))
            self.status.setText("opened")


def study_item(study: dict[str, Any]) -> QTreeWidgetItem:
    """A study's row — the patient's name and the study's description, date, patient ID, accession — and its
    series below (derived results listed, never opened)."""
    name = person_name(str(study.get("patient_name") or "")) or "(no name)"
    title = f"{name} · {study.get('description') or '(no description)'}"
    cells = [title, dicom_date(str(study.get("date") or "")), "", str(study.get("patient_id") or "—"),
             str(study.get("accession") or "—")]  # fmt: skip
    top = QTreeWidgetItem(cells)
    top.setData(0, URL_ROLE, study["url"])
    top.setToolTip(0, "  ".join(c for c in cells if c))
    for s in study["series"]:
        number = f"#{s['number']} " if s["number"] is not None else ""
        text = f"{number}{s['modality'] or '?'} {s['description'] or ''}".strip()
        derived = str(s["modality"] or "").upper() in DERIVED_RESULTS  # a SEG, SR, KO, PR: listed, never opened
        child = QTreeWidgetItem([f"derived result: {text}" if derived else text, "",
                                 str(s["instances"] if s["instances"] is not None else "")])  # fmt: skip
        child.setData(0, URL_ROLE, None if derived else s["url"])
        child.setToolTip(0, text)
        top.addChild(child)
    top.setExpanded(True)
    return top
