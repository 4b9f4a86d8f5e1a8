"""The copilot panel widget (chat, timeline, evidence, budget, approve mode, stop, report) and the model
service settings; both only bind to the Qt-free `PanelModel`."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QIcon, QPixmap
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from copilot.panel.answer_evidence import evidence_label
from copilot.panel.answer_words import answer_in_words, last_answer
from copilot.panel.model import PanelModel


class PanelWidget(QWidget):
    """The copilot panel: chat, timeline, evidence, budget, approve mode, stop, report."""

    def __init__(self, model: PanelModel, policies: dict[str, Any]) -> None:
        super().__init__()
        self.model, self.policies = model, policies
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        self.policy = QComboBox()
        self.policy.addItems(list(policies))
        self._grey_unavailable()
        self.run_button = QPushButton("Run")
        self.stop_button = QPushButton("Stop")
        row.addWidget(self.policy)
        row.addWidget(self.run_button)
        row.addWidget(self.stop_button)
        layout.addLayout(row)
        self.approve_mode = QCheckBox("Approve each action")
        approve_row = QHBoxLayout()
        self.approve_button, self.reject_button = QPushButton("Approve"), QPushButton("Reject")
        approve_row.addWidget(self.approve_mode)
        approve_row.addWidget(self.approve_button)
        approve_row.addWidget(self.reject_button)
        layout.addLayout(approve_row)
        self.budget = QProgressBar()
        self.budget.setMaximum(model.budget)
        self.budget.setFormat("%v / %m rounds")
        layout.addWidget(self.budget)
        layout.addWidget(QLabel("Actions"))
        self.timeline = QListWidget()
        layout.addWidget(self.timeline, 3)
        layout.addWidget(QLabel("Evidence (click to go there)"))
        self.evidence = QListWidget()
        layout.addWidget(self.evidence, 1)
        self.answer = QLabel("")
        self.answer.setWordWrap(True)
        self.answer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.answer.setStyleSheet("font-weight: bold; padding: 4px")
        self.answer.hide()
        layout.addWidget(self.answer)
        self.chat = QTextBrowser()
        layout.addWidget(self.chat, 2)
        self.instruction = QLineEdit()
        self.instruction.setPlaceholderText(
            "Question for the model (Run asks it; follow-ups continue the conversation), or a rejection's reason"
        )
        layout.addWidget(self.instruction)
        self.export_button = QPushButton("Export session report…")
        layout.addWidget(self.export_button)
        self.status = QLabel("idle")
        layout.addWidget(self.status)
        trace_dir = model.session.trace_dir
        self.trace_label = QLabel(f"Trace: {trace_dir}" if trace_dir else "Trace: not kept (replay)")
        self.trace_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.trace_label.setWordWrap(True)
        layout.addWidget(self.trace_label)
        self.run_button.clicked.connect(self._run)
        self.stop_button.clicked.connect(model.stop)
        self.approve_mode.toggled.connect(model.set_approve_mode)
        self.approve_button.clicked.connect(model.approve)
        self.reject_button.clicked.connect(self._reject)
        self.evidence.itemClicked.connect(lambda item: model.jump_to_evidence(self.evidence.row(item)))
        self.export_button.clicked.connect(self.export_dialog)

    def _grey_unavailable(self) -> None:
        """Offline policies that need a benchmark module are greyed on other studies, the reason as a tooltip."""
        from copilot.study.policies import policy_problem

        items = self.policy.model()
        for n, name in enumerate(self.policies):
            problem = policy_problem(name.split(" ")[0], self.model.case)
            if problem and hasattr(items, "item"):
                items.item(n).setEnabled(False)
                self.policy.setItemData(n, problem, Qt.ItemDataRole.ToolTipRole)
                if self.policy.currentIndex() == n:
                    self.policy.setCurrentIndex(min(n + 1, self.policy.count() - 1))

    def _run(self) -> None:
        m, name = self.model, self.policy.currentText()
        try:
            same = m.policy is not None and getattr(m.policy, "follow_ups", False) and m.policy_label == name
            policy = m.policy if same else self.policies[name]()
        except (RuntimeError, ValueError) as exc:  # cancelled settings, a policy unavailable here
            self.status.setText(str(exc))
            return
        m.policy_label = name
        m.run_episode(policy, self.instruction.text().strip())
        self.instruction.clear()

    def _reject(self) -> None:
        """Reject the pending proposal; the text in the instruction field, if any, is the reason."""
        self.model.reject(self.instruction.text().strip())
        self.instruction.clear()

    def export_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Session report", "session_report.html", "HTML (*.html)")
        if path:
            self.model.export_report(path)

    def refresh(self) -> None:
        m = self.model
        while self.timeline.count() > len(m.timeline):
            self.timeline.takeItem(self.timeline.count() - 1)
        for n, entry in enumerate(m.timeline):
            text = f"{n + 1}. [{entry.actor}] {entry.handler} — {entry.status}"
            text += f": {entry.error}" if entry.error else ""
            args = json.dumps(entry.args, separators=(",", ":"))
            tip = f"{entry.handler}({args[:300]})"
            if n < self.timeline.count():
                item = self.timeline.item(n)
                item.setToolTip(tip)
                if item.text() != text:
                    item.setText(text)
            else:
                item = QListWidgetItem(text)
                item.setToolTip(tip)
                if entry.thumbnail:
                    pix = QPixmap()
                    pix.loadFromData(entry.thumbnail)
                    item.setIcon(QIcon(pix.scaled(48, 48, Qt.AspectRatioMode.KeepAspectRatio)))
                self.timeline.addItem(item)
        labels = [evidence_label(e) for e in m.evidence]
        if [self.evidence.item(i).text() for i in range(self.evidence.count())] != labels:
            self.evidence.clear()
            self.evidence.addItems(labels)
        self.budget.setValue(min(m.rounds_used, m.budget))
        words = answer_in_words(last_answer(m.messages), str(getattr(m.case, "module", "") or ""))
        text = "\n".join(words)
        if text != self.answer.text():
            self.answer.setText(text)
            self.answer.setVisible(bool(words))
        chat = "\n\n".join(f"{who}: {text}" for who, text in m.messages)
        if chat != self.chat.toPlainText():
            self.chat.setPlainText(chat)
        waiting = f" — waiting for approval: {m.pending.handler}" if m.pending else ""
        if m.pending is not None and m.pending.write is not None:
            waiting += f"\nWrites outside the session: {m.pending.write.text()}"
        self.status.setText(f"{m.status}{waiting}")
        self.approve_button.setEnabled(m.pending is not None)
        self.reject_button.setEnabled(m.pending is not None)


class SettingsDialog(QDialog):
    """OpenAI-compatible service settings (base URL, model, key, temperature) for the model policy."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from copilot.agent.settings import AgentSettings

        self.setWindowTitle("Model service")
        current = AgentSettings.from_env()
        form = QFormLayout(self)
        self.base_url = QLineEdit(current.base_url or "")
        self.model = QLineEdit(current.model)
        self.api_key = QLineEdit(current.api_key)
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.temperature = QLineEdit(str(current.temperature))
        for label, widget in (
            ("Base URL", self.base_url),
            ("Model", self.model),
            ("API key", self.api_key),
            ("Temperature", self.temperature),
        ):
            form.addRow(label, widget)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def settings(self) -> Any:
        from copilot.agent.settings import AgentSettings

        return AgentSettings.from_env(
            base_url=self.base_url.text() or None,
            model=self.model.text() or None,
            api_key=self.api_key.text() or None,
            temperature=float(self.temperature.text() or 0),
        )


def default_policies(parent: QWidget | None = None) -> dict[str, Any]:
    from copilot.agent.loop import ChatAgent
    from copilot.medflow.policies import baseline_policy, prior_policy
    from copilot.medflow.registry import modules
    from copilot.study.policies import conversation

    def openai_agent() -> Any:
        """A conversation about the study; on a benchmark case pack without a question, the benchmark episode."""
        dialog = SettingsDialog(parent)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            raise RuntimeError("model settings were cancelled")
        model = getattr(parent, "model", None)
        panel = getattr(parent, "panel", None)
        question = panel.instruction.text().strip() if panel is not None else ""
        if model is not None and (question or getattr(model.case, "module", "") not in modules()):
            return conversation(dialog.settings(), model.case, model.session.kind,
                                announce=lambda line: model.messages.append(("system", line)))  # fmt: skip
        return ChatAgent(dialog.settings())

    return {
        "baseline (offline)": baseline_policy,
        "prior (offline)": prior_policy,
        "OpenAI-compatible model…": openai_agent,
    }
