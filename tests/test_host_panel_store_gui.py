"""A host's side panel's Store button (PySide6, offscreen) on a real session over a generated CT, after a real
conversation: it shows the desktop's Store dialog with the plan; Reject writes nothing (traced rejected by the
clinician), Store writes exactly the planned report (traced approved by the clinician)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from copilot.gui.host_panel import STORE_LABEL, HostPanel
from copilot.gui.store_dialog import StoreDialog
from copilot.host.conversation import HostConversation
from copilot.panel.banner import Banner, banner_from_facts
from copilot.replay import read_events
from copilot.session import Session
from tests.test_clinician_store import QUESTION, answered_host_conversation

pytestmark = pytest.mark.gui


@dataclass
class OwnStudyHost:
    """What the side panel reads of a host: a session on the clinician's own study and its conversation."""

    session: Session
    conversation: HostConversation
    image_facts: dict[str, Any] = field(default_factory=lambda: {"name": "CT"})
    errors: list[str] = field(default_factory=list)
    banner: Banner = field(default_factory=lambda: banner_from_facts(None, "CT"))

    @property
    def trace_path(self) -> Path | None:
        return self.session.trace_dir


def _press(panel: HostPanel, button: str, reason: str = "") -> str:
    """Press the panel's Store, then `button` of the dialog it opens; the plan the dialog showed."""
    shown: list[str] = []

    def answer() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, StoreDialog)
        shown.append(dialog.text.toPlainText())
        dialog.reason.setText(reason)
        getattr(dialog, button).click()

    QTimer.singleShot(100, answer)
    panel.store_button.click()
    assert shown, "no Store dialog came"
    return shown[0]


def test_the_side_panels_store_shows_the_plan_and_writes_only_what_was_approved(qtbot: Any, tmp_path: Path) -> None:
    host = OwnStudyHost(*answered_host_conversation(tmp_path))
    panel = HostPanel(host, "MedCopilot — CT", app="the viewer")
    qtbot.addWidget(panel)
    panel.refresh()
    assert panel.store_button.isEnabled() and panel.store_button.text() == STORE_LABEL
    report = tmp_path / "t" / "derived" / "clinician_report.dcm"

    plan = _press(panel, "reject_button", "not yet")
    assert plan.startswith("1. ") and f"question: «{QUESTION}»" in plan and "1 key slice(s)" in plan
    assert panel.store_said.text() == "nothing was stored" and not report.exists()

    assert _press(panel, "store_button") == plan  # the same plan, now approved
    assert panel.store_said.text() == "clinician_report.dcm: written" and report.is_file()
    host.session.close()
    events, _ = read_events(tmp_path / "t")
    attempts = [e for e in events if e["type"] == "write_attempt"]
    assert [(e["handler"], e["decision"], e["by"]) for e in attempts] == [
        ("export_evidence_sr", "rejected", "clinician"), ("export_evidence_sr", "approved", "clinician")
    ]  # fmt: skip
    assert all(e["actor"] == "clinician" for e in attempts)
    assert attempts[0]["destinations"] == attempts[1]["destinations"] and str(report) in plan
    assert next(e for e in events if e["type"] == "clinician_rejection")["reason"] == "not yet"
    # one object written (the approved one), beside the session's book of tracked lesions and of what it stored
    assert sorted(p.name for p in (tmp_path / "t" / "derived").iterdir()) == [
        "clinician_report.dcm", "lesions.json", "stored.json"]  # fmt: skip
