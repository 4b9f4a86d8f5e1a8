"""The series picker: a DICOM folder's series, one line each with the facts that tell them apart (number,
description, modality, image count, date, the end of the UID; never a patient identifier). One series opens
alone; several (Ctrl- or Shift-click) open together, the first as the background, the others ready as
foregrounds. The study's derived results (segmentations, reports) are listed apart below, never as series; a
segmentation is named on the series it was made on."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractItemView, QDialog, QDialogButtonBox, QLabel, QListWidget, QVBoxLayout, QWidget

from copilot.panel.derived import Derived, overlays_for
from copilot.panel.studies import Series


class SeriesDialog(QDialog):
    """Choose one or several series of a folder."""

    def __init__(
        self, found: list[Series], parent: QWidget | None = None, derived: list[Derived] | None = None
    ) -> None:
        super().__init__(parent)
        self.found = found
        self.setWindowTitle("Series")
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("This folder holds several series. Open one, or several together (Ctrl-click):\n"
                                "the first is the background, the others can be shown over it."))  # fmt: skip
        self.list = QListWidget()
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        derived = list(derived or [])
        self.list.addItems([s.title + "".join(f" · with {d.modality} {d.description}".rstrip()
                                             for d in overlays_for(derived, s.uid)) for s in found])  # fmt: skip
        self.list.setCurrentRow(0)
        self.list.itemDoubleClicked.connect(lambda _: self.accept())
        self.list.setMinimumWidth(560)
        layout.addWidget(self.list)
        self.derived = QLabel("Derived results (not images): " + "; ".join(d.title for d in derived))
        self.derived.setWordWrap(True)
        self.derived.setVisible(bool(derived))
        layout.addWidget(self.derived)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def chosen(self) -> list[Series]:
        """The selected series in the folder's order."""
        rows = sorted(self.list.row(item) for item in self.list.selectedItems())
        return [self.found[r] for r in rows]
