"""The Slicer module's panel where the Slicer application is absent: its `.ui` loaded with PySide6 (Slicer's
own root widget class replaced by a plain QWidget), the panel state of a real conversation on slicer-core's
scene copied into it by the module's own `PanelView`, and a picture of it (docs/slicer_panel.png is made by
this test with MEDCOPILOT_SCREENSHOTS=docs)."""

from __future__ import annotations

import os
import re
import sys
import time
from importlib.util import find_spec
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

if find_spec("slicer_core") is None:  # present-or-not without importing it at collection
    pytest.skip("needs slicer-core", allow_module_level=True)
pytest.importorskip("PySide6")

from copilot.host.panel import MainThreadCalls, panel_state
from copilot.host.slicer import SlicerHost, model_settings
from tests.fake_openai import FakeOpenAI
from tests.test_slicer_host import SCRIPT, _user_scene

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "slicer_ext" / "MedCopilot"
sys.path.insert(0, str(MODULE))


def _load_panel() -> tuple[Any, SimpleNamespace]:
    """The module's .ui as PySide6 widgets, and its named children as Slicer's childWidgetVariables gives them."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtUiTools import QUiLoader
    from PySide6.QtWidgets import QWidget

    text = (MODULE / "Resources" / "UI" / "MedCopilot.ui").read_text()
    text = text.replace('class="qMRMLWidget"', 'class="QWidget"')
    text = re.sub(r"<customwidgets>.*</customwidgets>", "", text, flags=re.S)
    data = QByteArray(text.encode())
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.ReadOnly)
    loader = QUiLoader()
    widget = loader.load(buf)
    buf.close()
    assert widget is not None
    names = set(re.findall(r'name="(\w+)"', text))
    found = {n: widget.findChild(QWidget, n) for n in names}
    return widget, SimpleNamespace(**{n: w for n, w in found.items() if w is not None})


def _wait(cond: Any, calls: MainThreadCalls, app: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        calls.pump()
        app.processEvents()
        time.sleep(0.01)


def test_the_panel_shows_a_conversation_on_the_users_scene(qtbot: Any, tmp_path: Path) -> None:
    from MedCopilotLib.panel_view import PanelView
    from PySide6.QtWidgets import QApplication, QLineEdit

    widget, ui = _load_panel()
    qtbot.addWidget(widget)
    used = set(re.findall(r"self\.ui\.(\w+)", (MODULE / "MedCopilot.py").read_text()))
    assert used <= set(vars(ui)), used - set(vars(ui))
    assert ui.apiKeyEdit.echoMode() == QLineEdit.EchoMode.Password
    assert ui.apiKeyEdit.property("SlicerParameterName") is None  # the key is never a scene parameter
    view = PanelView(ui)
    view.apply(panel_state(None))
    assert not ui.askButton.isEnabled() and "No copilot session" in ui.statusLabel.text()

    fake = FakeOpenAI(SCRIPT)
    try:
        s, _node = _user_scene(tmp_path)
        calls = MainThreadCalls()  # the agent's handler calls run here, as on Slicer's main thread
        host = SlicerHost.adopt(s.scene, s.app_logic, tmp_path / "trace",
                                settings=lambda: model_settings(fake.base_url, "m"), on_host=calls)  # fmt: skip
        conv = host.conversation
        app = QApplication.instance()

        def show() -> None:
            view.apply(panel_state(conv, host.inventory_text(), str(host.trace_path)))

        conv.ask("Is there an enhancing lesion?")
        _wait(lambda: conv.pending is not None, calls, app)
        show()
        assert ui.approveButton.isEnabled() and ui.rejectButton.isEnabled() and ui.stopButton.isEnabled()
        assert ui.pendingLabel.text().startswith("Proposed: wl")
        assert not ui.askButton.isEnabled()
        conv.reject("keep my window")
        for _ in range(2):
            last = conv.pending
            _wait(lambda last=last: conv.pending is not None and conv.pending is not last, calls, app)
            conv.approve()
        _wait(lambda: not conv.busy, calls, app)
        conv.ask("And the other side?")
        _wait(lambda: not conv.busy, calls, app)
        show()
        assert "Copilot: The opposite side looks normal" in ui.chatText.toPlainText()
        assert ui.timelineList.count() == len(conv.actions)
        assert "rejected — keep my window" in ui.timelineList.item(1).text()
        assert [ui.evidenceList.item(i).text() for i in range(ui.evidenceList.count())] == conv.evidence_labels()
        assert not ui.approveButton.isEnabled() and ui.askButton.isEnabled()
        assert str(tmp_path / "trace") in ui.traceLabel.text()
        assert ui.inventoryLabel.text() == "MR series 3 (MR)"
        ui.apiKeyEdit.setText("sk-typed-for-this-session")
        ui.questionEdit.setText("Measure the lesion?")
        widget.resize(440, 1180)
        widget.show()
        qtbot.waitExposed(widget)
        picture = Path(os.environ.get("MEDCOPILOT_SCREENSHOTS", tmp_path)) / "slicer_panel.png"
        assert widget.grab().save(str(picture))
        assert picture.stat().st_size > 10_000
        host.close()
    finally:
        fake.stop()
