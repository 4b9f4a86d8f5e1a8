"""The copilot panel widget (chat streamed as the model writes, timeline, evidence, per-question rounds, tokens and
cost, approvals in words with a reason field, stop, undo, report) and the model service settings; both only bind
to the Qt-free `PanelModel`."""

from __future__ import annotations

import json
import math
import time
from typing import Any

from PySide6.QtCore import Qt, QTimer
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

from copilot.panel.action_rows import action_rows
from copilot.panel.action_words import action_words
from copilot.panel.answer_evidence import evidence_label
from copilot.panel.answer_words import answer_in_words, last_answer
from copilot.panel.model import PanelModel

TIMELINE_FOLLOW_S = 0.25  # during a burst of calls (a wheel scroll) the timeline follows at most four times a second


class PanelWidget(QWidget):
    """The copilot panel: chat, timeline, evidence, budget, approve mode, stop, report."""

    def __init__(self, model: PanelModel, policies: dict[str, Any]) -> None:
        super().__init__()
        self.model, self.policies = model, policies
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        self.policy = QComboBox()
        self.policy.addItems(list(policies))
        self.policy.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.policy.setMinimumContentsLength(14)  # a long policy name never widens the dock over the views
        self._grey_unavailable()
        self.run_button = QPushButton("Run")
        self.stop_button = QPushButton("Stop")
        row.addWidget(self.policy)
        row.addWidget(self.run_button)
        row.addWidget(self.stop_button)
        layout.addLayout(row)
        self.approve_mode = QCheckBox("Approve each action")
        approve_row = QHBoxLayout()
        self.undo_button = QPushButton("Undo")
        self.undo_button.setToolTip("take back the last change of the views or the evidence, the agent's or yours")
        approve_row.addWidget(self.approve_mode)
        approve_row.addStretch(1)
        approve_row.addWidget(self.undo_button)
        layout.addLayout(approve_row)
        self.proposal = QLabel("")  # the pending action in words, every argument said
        self.proposal.setWordWrap(True)
        self.proposal.setStyleSheet("background: #fff4c8; color: #202020; padding: 4px")
        self.proposal.hide()
        layout.addWidget(self.proposal)
        decide_row = QHBoxLayout()
        self.approve_button, self.reject_button = QPushButton("Approve"), QPushButton("Reject")
        self.reason = QLineEdit()
        self.reason.setPlaceholderText("reason for a rejection (told to the model)")
        decide_row.addWidget(self.approve_button)
        decide_row.addWidget(self.reason, 1)
        decide_row.addWidget(self.reject_button)
        layout.addLayout(decide_row)
        self.budget = QProgressBar()
        self.budget.setMaximum(model.budget)
        self.budget.setFormat("%v / %m rounds this question")
        layout.addWidget(self.budget)
        layout.addWidget(QLabel("Actions"))
        self.timeline = QListWidget()
        layout.addWidget(self.timeline, 3)
        self._rows: list[tuple[Any, ...]] = []  # what each row was made from (its entry, status, error, thumbnail)
        self._rows_at = 0.0  # when the rows last followed the model (monotonic seconds)
        self._rows_timer = QTimer(self, singleShot=True)
        self._rows_timer.timeout.connect(self.refresh_timeline)
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
        self.instruction.setPlaceholderText("Question for the model (Run asks it; follow-ups continue)")
        layout.addWidget(self.instruction)
        self.export_button = QPushButton("Export session report…")
        layout.addWidget(self.export_button)
        self.status = QLabel("idle")
        self.status.setWordWrap(True)  # a long status never widens the dock
        layout.addWidget(self.status)
        self.cost = QLabel("")
        self.cost.setWordWrap(True)
        self.cost.setToolTip("tokens and cost of this question and of the session (prices: the editable table)")
        layout.addWidget(self.cost)
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
        self.reason.returnPressed.connect(self._reject)
        self.undo_button.clicked.connect(self.undo)
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
        """Reject the pending proposal with the reason typed in its own field."""
        self.model.reject(self.reason.text().strip())
        self.reason.clear()

    def undo(self) -> None:
        """Take back the last change (refused while the agent runs: the reason shows in the status)."""
        try:
            self.model.undo()
        except (IndexError, RuntimeError) as exc:
            self.status.setText(str(exc))

    def export_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Session report", "session_report.html", "HTML (*.html)")
        if path:
            self.model.export_report(path)

    def refresh(self) -> None:
        m = self.model
        self._timeline_rows_soon()
        labels = [evidence_label(e) for e in m.evidence]
        if [self.evidence.item(i).text() for i in range(self.evidence.count())] != labels:
            self.evidence.clear()
            self.evidence.addItems(labels)
        self.budget.setValue(min(m.rounds_used, m.budget))  # per question: a follow-up starts at 0
        words = answer_in_words(last_answer(m.messages), str(getattr(m.case, "module", "") or ""))
        text = "\n".join(words)
        if text != self.answer.text():
            self.answer.setText(text)
            self.answer.setVisible(bool(words))
        self.refresh_chat()
        pending = m.pending
        if pending is not None:
            asked = f"The agent asks to {action_words(pending.handler, pending.args)}."
            if pending.write is not None:
                asked += f"\nWrites outside the session:\n{pending.write.text()}"
            self.proposal.setText(asked)
        self.proposal.setVisible(pending is not None)
        self.status.setText(m.status + (" — waiting for your approval" if pending is not None else ""))
        for widget in (self.approve_button, self.reject_button, self.reason):
            widget.setEnabled(pending is not None)
        last = m.history.last()
        self.undo_button.setEnabled(last is not None and m.status != "running")
        self.undo_button.setToolTip(f"undo {last.title()}" if last is not None else "nothing to undo")

    def _timeline_rows_soon(self) -> None:
        """The timeline's rows now, or, within `TIMELINE_FOLLOW_S` of their last update, once it has passed: a wheel
        scroll's calls each add a row, and redrawing the list for each would cost the slice panes their frames."""
        wait = self._rows_at + TIMELINE_FOLLOW_S - time.monotonic()
        if wait <= 0:
            self.refresh_timeline()
        elif not self._rows_timer.isActive():
            self._rows_timer.start(math.ceil(wait * 1000))

    def refresh_timeline(self) -> None:
        """The timeline's rows as the model has them, the clinician's repeated steps folded into one row (rows
        whose entries are unchanged are left as they are)."""
        self._rows_timer.stop()
        self._rows_at = time.monotonic()
        rows = action_rows(self.model.timeline)
        while self.timeline.count() > len(rows):
            self.timeline.takeItem(self.timeline.count() - 1)
            self._rows.pop()
        for n, row in enumerate(rows):
            seen, entry = row.key(), row.entry
            if n < len(self._rows) and self._rows[n] == seen:
                continue
            text = row.text()
            args = json.dumps(entry.args, separators=(",", ":"))
            tip = f"{action_words(entry.handler, entry.args)}\n{entry.handler}({args[:300]})"
            if n < self.timeline.count():
                item = self.timeline.item(n)
                item.setToolTip(tip)
                if item.text() != text:
                    item.setText(text)
                self._rows[n] = seen
            else:
                item = QListWidgetItem(text)
                item.setToolTip(tip)
                if entry.thumbnail:
                    pix = QPixmap()
                    pix.loadFromData(entry.thumbnail)
                    item.setIcon(QIcon(pix.scaled(48, 48, Qt.AspectRatioMode.KeepAspectRatio)))
                self.timeline.addItem(item)
                self._rows.append(seen)

    def refresh_chat(self) -> None:
        """The conversation with the model's text of the round in progress as it arrives, and the usage line."""
        m = self.model
        lines = [f"{who}: {text}" for who, text in m.messages]
        streamed = m.streamed
        if streamed:
            lines.append(f"agent (writing…): {streamed}")
        chat = "\n\n".join(lines)
        if chat != self.chat.toPlainText():
            self.chat.setPlainText(chat)
            bar = self.chat.verticalScrollBar()
            bar.setValue(bar.maximum())
        usage = m.usage_text()
        self.cost.setText(usage)
        self.cost.setVisible(bool(usage))


class SettingsDialog(QDialog):
    """The model service: provider (OpenAI-compatible, Azure, a local server, Anthropic, Gemini), base URL, model
    (typed, or chosen from what the service lists), key and temperature."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from copilot.agent.settings import AgentSettings
        from copilot.llm.providers import PROVIDERS

        self.setWindowTitle("Model service")
        current = AgentSettings.from_env()
        form = QFormLayout(self)
        self.provider = QComboBox()
        self.provider.addItems(list(PROVIDERS))
        self.base_url = QLineEdit(current.base_url or "")
        self.model = QComboBox()
        self.model.setEditable(True)
        self.model.setCurrentText(current.model)
        self.list_button = QPushButton("List the service's models")
        self.list_button.clicked.connect(self.list_models)
        self.listing = QLabel("")
        self.api_key = QLineEdit("" if current.api_key == "not-needed" else current.api_key)
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("from the environment")
        self.temperature = QLineEdit(str(current.temperature))
        for label, widget in (
            ("Provider", self.provider),
            ("Base URL", self.base_url),
            ("Model", self.model),
            ("", self.list_button),
            ("", self.listing),
            ("API key", self.api_key),
            ("Temperature", self.temperature),
        ):
            form.addRow(label, widget)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def list_models(self) -> None:
        """Offer the models the service lists (or say why it cannot list them)."""
        from copilot.llm.connect import connect, explain
        from copilot.llm.types import ModelError

        try:
            settings = self.settings()
            _, wire = connect(settings.spec(), 15.0)
            names = wire.list_models()
        except ModelError as exc:
            self.listing.setText(explain(exc, settings.spec()))
            return
        except ValueError as exc:
            self.listing.setText(str(exc))
            return
        typed = self.model.currentText()
        self.model.clear()
        self.model.addItems(names)
        self.model.setCurrentText(typed if typed in names else (names[0] if names else typed))
        self.listing.setText(f"{len(names)} models listed")

    def settings(self) -> Any:
        from copilot.agent.settings import AgentSettings

        return AgentSettings.for_policy(
            self.provider.currentText(),
            base_url=self.base_url.text() or None,
            model=self.model.currentText() or None,
            api_key=self.api_key.text() or None,
            temperature=float(self.temperature.text() or 0),
        )


def _yes(parent: QWidget | None, text: str) -> bool:
    """The clinician's explicit yes before anything is sent (No is the default button)."""
    from PySide6.QtWidgets import QMessageBox

    buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
    answer = QMessageBox.question(parent, "Send to the model service?", text, buttons, QMessageBox.StandardButton.No)
    return bool(answer == QMessageBox.StandardButton.Yes)


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
            return conversation(dialog.settings(), model.case, model.session.kind, ask=lambda text: _yes(parent, text),
                                announce=lambda line: model.messages.append(("system", line)))  # fmt: skip
        return ChatAgent(dialog.settings())

    return {
        "baseline (offline)": baseline_policy,
        "prior (offline)": prior_policy,
        "Model (OpenAI, Anthropic, Gemini, local)…": openai_agent,
    }
