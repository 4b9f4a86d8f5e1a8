"""The copilot as a side panel beside a host's own views (PySide6): `medcopilot gui --attach qupath` (or
`--qupath [PORT]`) attaches it to the image open in a running QuPath; a plug-in host's panel builds the same
widget. It shows a `copilot.host.panel.PanelState` and forwards clicks to the host's conversation; the views are
the host's own."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from copilot.gui.patient_bar import STYLE
from copilot.gui.store_dialog import ask_in_dialog
from copilot.host.panel import PanelState, panel_state
from copilot.host.store import host_store
from copilot.panel.store import StorePlan
from copilot.privatefs import make_private

STORE_LABEL = "Store to PACS / Export…"
STORE_TIP = "Lists exactly what would be written and where; nothing is written until you press Store."
NOTHING_TO_STORE = "Nothing to store for this study"


def _group(title: str, *widgets: QWidget | QHBoxLayout) -> QGroupBox:
    box = QGroupBox(title)
    lay = QVBoxLayout(box)
    for w in widgets:
        lay.addLayout(w) if isinstance(w, QHBoxLayout) else lay.addWidget(w)
    return box


def _row(*widgets: QWidget) -> QHBoxLayout:
    row = QHBoxLayout()
    for w in widgets:
        row.addWidget(w)
    return row


class HostPanel(QWidget):
    """Conversation, approvals, actions, evidence, report and trace of one host session."""

    def __init__(self, host: Any, title: str, app: str = "QuPath") -> None:
        super().__init__()
        self.host = host
        self.setWindowTitle(title)
        self.patient = QLabel(wordWrap=True)  # whose image it is: never sent to the model
        self.patient.setStyleSheet(STYLE)
        self.inventory = QLabel(wordWrap=True)
        self.chat = QPlainTextEdit(readOnly=True)
        self.question = QLineEdit(placeholderText="Ask about this image…")
        self.ask_button = QPushButton("Ask")
        self.approve_each = QCheckBox("Ask me before every action")
        self.approve_each.setChecked(True)
        self.pending = QLabel(wordWrap=True)
        self.reason = QLineEdit(placeholderText="Reason (sent to the model when you reject)")
        self.approve_button, self.reject_button = QPushButton("Approve"), QPushButton("Reject")
        self.stop_button = QPushButton("Stop")
        self.action_list = QListWidget()
        self.evidence_list = QListWidget()
        self.export_button = QPushButton("Export evidence report…")
        self.store_button = QPushButton(STORE_LABEL)  # the clinician's Store: the desktop's plan and dialog
        self.store_said = QLabel(wordWrap=True)
        self.trace = QLabel(wordWrap=True)
        self.status = QLabel(wordWrap=True)
        self.action_list.setMaximumHeight(130)
        self.evidence_list.setMaximumHeight(110)
        lay = QVBoxLayout(self)
        lay.addWidget(_group(f"Image open in {app}", self.patient, self.inventory))
        lay.addWidget(_group("Conversation", self.chat, _row(self.question, self.ask_button)))
        lay.addWidget(_group("Approve each action", self.approve_each, self.pending, self.reason,
                             _row(self.approve_button, self.reject_button, self.stop_button)))  # fmt: skip
        lay.addWidget(_group("Actions", self.action_list))
        lay.addWidget(_group(f"Evidence (click to go there; written into {app})", self.evidence_list,
                             self.export_button, self.store_button, self.store_said, self.trace))  # fmt: skip
        lay.addWidget(self.status)
        self.ask_button.clicked.connect(self.ask)
        self.question.returnPressed.connect(self.ask)
        self.approve_button.clicked.connect(lambda: host.conversation.approve())
        self.reject_button.clicked.connect(self.reject)
        self.stop_button.clicked.connect(lambda: host.conversation.stop())
        self.evidence_list.itemClicked.connect(lambda item: host.conversation.go_to(self.evidence_list.row(item)))
        self.export_button.clicked.connect(self.export)
        self.store_button.clicked.connect(lambda: self.store())
        self.app = app
        self.last: PanelState | None = None
        self.timer = QTimer(self, interval=150)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()
        self.refresh()

    def ask(self) -> None:
        text = self.question.text().strip()
        if text and not self.host.conversation.busy and self._opted_in():
            self.host.conversation.approve_each = self.approve_each.isChecked()
            self.host.conversation.ask(text)
            self.question.clear()

    def _opted_in(self) -> bool:
        """The clinician's explicit yes before the first request to a service off this machine (asked once per
        service and remembered; a loopback service needs none)."""
        from copilot.panel import optin

        url = getattr(self.host.conversation, "service_url", None)
        if url is None:
            return True

        def ask(text: str) -> bool:
            buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
            answer = QMessageBox.question(self, "Send to the model service?", text, buttons,
                                          QMessageBox.StandardButton.No)  # fmt: skip
            return bool(answer == QMessageBox.StandardButton.Yes)

        try:
            optin.ensure(url(), tuple(optin.KINDS), ask)
        except ValueError as exc:  # not agreed (or no usable service URL): nothing is sent
            QMessageBox.information(self, "Nothing was sent", str(exc))
            return False
        return True

    def reject(self) -> None:
        self.host.conversation.reject(self.reason.text())
        self.reason.clear()

    def export(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export evidence report", "medcopilot-report.html", "HTML (*.html)")
        if path:
            self.host.conversation.export_report(path)

    def store(self, ask: Callable[[StorePlan], tuple[str, str]] | None = None) -> list[str]:
        """Store to PACS / Export: the plan shown in the desktop's Store dialog (or to `ask`), written only on Store,
        nothing on Reject or Cancel; what happened is said below the button."""
        who = self.host.banner.line  # the dialog names the patient as the banner does
        words = host_store(self.host.conversation, ask or (lambda plan: ask_in_dialog(plan, self, who)))
        self.store_said.setText("\n".join(words))
        return words

    def state(self) -> PanelState:
        f = self.host.image_facts
        mpp = f"{f['mpp'][0]:.3f} µm/px" if f.get("mpp") else "no pixel size"
        dims = "×".join(str(d) for d in f.get("dimensions", []))
        facts = f"{f.get('name', '')} — {dims} px, {mpp}, {f.get('levels')} levels"
        return panel_state(self.host.conversation, [facts], str(self.host.trace_path or ""), self.host.errors,
                           self.host.banner.line)  # fmt: skip

    def refresh(self) -> None:
        s = self.state()
        if self.last is None or s != self.last:
            self.inventory.setText(s.inventory)
            self.patient.setText(s.banner)
            if self.last is None or s.history != self.last.history:
                self.chat.setPlainText(s.history)
            if self.last is None or s.actions != self.last.actions:
                self.action_list.clear()
                self.action_list.addItems(s.actions)
            if self.last is None or s.evidence != self.last.evidence:
                self.evidence_list.clear()
                self.evidence_list.addItems(s.evidence)
            self.pending.setText(s.pending)
            self.trace.setText(f"Trace: {s.trace or '—'}")
            self.status.setText(" · ".join([s.status, *s.errors]))
        self.ask_button.setEnabled(s.can_ask)
        self.question.setEnabled(s.can_ask)
        self.approve_button.setEnabled(s.can_decide)
        self.reject_button.setEnabled(s.can_decide)
        self.stop_button.setEnabled(s.can_stop)
        self.store_button.setEnabled(s.can_store)
        self.store_button.setText(NOTHING_TO_STORE if s.store_note else STORE_LABEL)
        self.store_button.setToolTip(
            f"{NOTHING_TO_STORE}: {s.store_note}. The evidence stays as annotations in {self.app} and in the "
            "exported evidence report."
            if s.store_note
            else STORE_TIP
        )
        self.last = s


def qupath_main(port: int | str, trace_dir: str | None = None, screenshot: str | None = None) -> int:
    """Attach the panel to the image open in the QuPath whose Py4J gateway listens on `port` (token:
    $MEDCOPILOT_QUPATH_TOKEN); with `screenshot`, save a picture of the panel and exit."""
    from copilot.gui.app import display_problem
    from copilot.host.qupath import adopt_open_image
    from qupath_ext.open_image import OpenImageViewer

    problem = None if screenshot else display_problem()
    if problem is not None:
        print(f"medcopilot gui: {problem}", file=sys.stderr)
        return 2
    try:
        viewer = OpenImageViewer.connect(int(port), os.environ.get("MEDCOPILOT_QUPATH_TOKEN"))
    except ConnectionError as exc:
        print(f"medcopilot gui: {exc}", file=sys.stderr)
        return 2
    folder = trace_dir or str(Path("traces") / time.strftime("qupath-%Y%m%d-%H%M%S"))
    try:
        host = adopt_open_image(viewer, folder)
    except Exception as exc:  # no image open, gateway gone
        print(f"medcopilot gui: {exc}", file=sys.stderr)
        viewer.disconnect()
        return 2
    app = QApplication.instance() or QApplication(sys.argv)
    panel = HostPanel(host, f"{host.banner.title} — QuPath")
    panel.resize(440, 900)
    panel.show()
    try:
        if screenshot:
            app.processEvents()
            panel.grab().save(screenshot)
            make_private(screenshot)  # the patient banner is in the picture
            print(screenshot)
            return 0
        return int(app.exec())
    finally:
        host.close()
        viewer.disconnect()
