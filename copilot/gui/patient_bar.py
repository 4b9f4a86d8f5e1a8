"""The desktop's patient banner (PySide6): a fixed bar above the views showing `copilot.panel.banner.Banner`, so
the clinician always sees whose study is open; it is never part of what the model is sent."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QToolBar

from copilot.panel.banner import NO_DETAILS, Banner

STYLE = "QLabel { background: #1d2b3a; color: #ffffff; padding: 5px 10px; font-size: 14px; }"
CHANGED_STYLE = "QLabel { background: #7a4b00; color: #ffffff; padding: 5px 10px; font-size: 14px; }"


class PatientBar(QToolBar):
    """One row over the views: the patient's name in bold, then ID, birth date and age, sex, study, accession,
    modality and institution; amber for a few seconds when another study replaces the one shown."""

    def __init__(self) -> None:
        super().__init__("Patient")
        self.setObjectName("patient_bar")
        self.setMovable(False)
        self.setFloatable(False)
        self.label = QLabel("No study open")
        self.label.setStyleSheet(STYLE)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)  # the whole row
        self.addWidget(self.label)
        self.banner: Banner | None = None

    def show_banner(self, banner: Banner) -> bool:
        """Show a study's banner; True when it is another study than the one shown before."""
        changed = self.banner is not None and self.banner.facts != banner.facts
        who = html.escape(banner.patient or NO_DETAILS)
        rest = "".join(
            f"&nbsp;&nbsp;<span style='color:#9cc3ea'>{html.escape(k)}</span>&nbsp;{html.escape(v)}"
            for k, v in banner.fields
        )
        self.label.setText(f"<b>{who}</b>{rest}")
        self.label.setToolTip(banner.line)
        self.label.setStyleSheet(CHANGED_STYLE if changed else STYLE)
        self.banner = banner
        return changed

    def settle(self) -> None:
        """Back to the usual colours after a change was shown."""
        self.label.setStyleSheet(STYLE)
