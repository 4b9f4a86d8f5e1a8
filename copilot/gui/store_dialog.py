"""The desktop's Store to PACS / Export: a dialog that lists exactly what the Store would write and where (the
write plans of the Qt-free `copilot.panel.store`), with Store/Export, Reject with a reason, and Cancel."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from copilot.panel.store import StorePlan, outcome_words, store_with


class StoreDialog(QDialog):
    """Shows a Store's plan; `decision()` is approve, reject (with the reason typed) or stop (closed)."""

    def __init__(self, plan: StorePlan, parent: QWidget | None = None, patient: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle(plan.title())
        self._decision = "stop"
        layout = QVBoxLayout(self)
        if patient:  # whose study these results are of, as the banner names the patient (never by UIDs)
            self.patient = QLabel(f"Patient: {patient}")
            self.patient.setWordWrap(True)
            layout.addWidget(self.patient)
        where = "the study's PACS" if plan.to_pacs else "files (the study did not come from a PACS)"
        layout.addWidget(QLabel(f"Writes outside the session, to {where}, exactly this:"))
        self.text = QPlainTextEdit("\n\n".join(plan.lines()))
        self.text.setReadOnly(True)
        self.text.setMinimumSize(720, 260)
        layout.addWidget(self.text)
        self.reason = QLineEdit()
        self.reason.setPlaceholderText("reason, if you reject")
        layout.addWidget(self.reason)
        buttons = QDialogButtonBox()
        self.store_button = QPushButton("Store" if plan.to_pacs else "Export")
        self.reject_button = QPushButton("Reject")
        buttons.addButton(self.store_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(self.reject_button, QDialogButtonBox.ButtonRole.RejectRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.store_button.clicked.connect(lambda: self._done("approve"))
        self.reject_button.clicked.connect(lambda: self._done("reject"))
        buttons.button(QDialogButtonBox.StandardButton.Cancel).clicked.connect(lambda: self._done("stop"))
        layout.addWidget(buttons)

    def _done(self, decision: str) -> None:
        self._decision = decision
        self.accept() if decision == "approve" else self.reject()

    def decision(self) -> tuple[str, str]:
        return self._decision, self.reason.text().strip()


def ask_in_dialog(plan: StorePlan, parent: QWidget | None = None, patient: str = "") -> tuple[str, str]:
    """Show a Store's plan in the dialog (modal), under the patient's banner line, and return the clinician's
    decision and reason; the desktop and a host's side panel both ask this way."""
    dialog = StoreDialog(plan, parent, patient)
    dialog.exec()
    return dialog.decision()


def store_results(window: Any, ask: Any = None) -> list[str]:
    """File → Store to PACS / Export: plan, show the dialog (or `ask(plan)`), write only on Store; the lines said."""
    model = window.model
    if model is None:
        return []
    if model.status == "running":
        words = ["the agent is running: stop it or wait for its answer before storing"]
    else:

        def confirm(plan: StorePlan) -> tuple[str, str]:
            if ask is not None:
                return ask(plan)  # type: ignore[no-any-return]
            from copilot.panel.banner import study_banner

            return ask_in_dialog(plan, window, study_banner(model.case).line)

        plan, outcomes = store_with(model, confirm)
        words = [outcome_words(o) for o in outcomes] or (["nothing to store: " + "; ".join(plan.problems)]
                                                         if not plan.steps else ["nothing was stored"])  # fmt: skip
    if not window.quiet:
        QMessageBox.information(window, "Store", "\n".join(words))
    return words
