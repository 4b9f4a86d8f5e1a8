"""Copies a `copilot.host.panel.PanelState` into the panel's widgets (Resources/UI/MedCopilot.ui). It uses only
calls that Slicer's PythonQt and PySide6 share (setText, setPlainText, clear, addItem, setEnabled), so the
widget test renders the same panel with PySide6 where the application is absent."""

from __future__ import annotations

from typing import Any


class PanelView:
    """The panel's widgets; `apply` updates only what changed (a list keeps its selection otherwise)."""

    def __init__(self, ui: Any) -> None:
        self.ui = ui
        self.last: Any = None

    def _changed(self, state: Any, *names: str) -> bool:
        return self.last is None or any(getattr(self.last, n) != getattr(state, n) for n in names)

    @staticmethod
    def _fill(widget: Any, lines: list[str]) -> None:
        widget.clear()
        for line in lines:
            widget.addItem(line)

    def apply(self, state: Any) -> None:
        ui = self.ui
        if self._changed(state, "status", "errors"):
            ui.statusLabel.setText(" · ".join([state.status, *state.errors]))
        if self._changed(state, "banner") and hasattr(ui, "patientLabel"):
            ui.patientLabel.setText(state.banner or "No patient details in this scene's DICOM attributes")
        if self._changed(state, "inventory"):
            ui.inventoryLabel.setText(state.inventory or "No copilot session yet.")
        if self._changed(state, "history"):
            ui.chatText.setPlainText(state.history)
        if self._changed(state, "actions"):
            self._fill(ui.timelineList, state.actions)
        if self._changed(state, "evidence"):
            self._fill(ui.evidenceList, state.evidence)
        if self._changed(state, "pending"):
            ui.pendingLabel.setText(state.pending)
        if self._changed(state, "trace"):
            ui.traceLabel.setText(f"Trace: {state.trace or '—'}")
        ui.askButton.setEnabled(state.can_ask)
        ui.questionEdit.setEnabled(state.can_ask)
        for button in (ui.approveButton, ui.rejectButton):
            button.setEnabled(state.can_decide)
        ui.stopButton.setEnabled(state.can_stop)
        if hasattr(ui, "storeButton"):
            ui.storeButton.setEnabled(state.can_store)
        self.last = state
