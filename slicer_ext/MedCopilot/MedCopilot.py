"""MedCopilot scripted module: the copilot panel beside Slicer's views, a Slicer backend for every handler,
and a WebServer request handler serving `/medcopilot/v1` (no code execution anywhere)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import qt
import slicer
from slicer.parameterNodeWrapper import parameterNodeWrapper
from slicer.ScriptedLoadableModule import (
    ScriptedLoadableModule,
    ScriptedLoadableModuleLogic,
    ScriptedLoadableModuleTest,
    ScriptedLoadableModuleWidget,
)
from slicer.util import VTKObservationMixin

REPO_ROOT = Path(__file__).resolve().parents[2]


class MedCopilot(ScriptedLoadableModule):
    def __init__(self, parent: Any) -> None:
        ScriptedLoadableModule.__init__(self, parent)
        self.parent.title = "MedCopilot"
        self.parent.categories = ["Informatics"]
        self.parent.dependencies = ["WebServer"]
        self.parent.contributors = ["MedCopilot developers"]
        self.parent.helpText = (
            "An agent operates the views through named, audited handlers; every call is "
            "traced. Run an offline baseline or an OpenAI-compatible model from the panel."
        )
        self.parent.acknowledgementText = "Built on 3D Slicer's MRML scene and WebServer module."


@parameterNodeWrapper
class MedCopilotParameterNode:
    caseDir: str = ""
    policy: str = "baseline"
    track: str = "A"
    port: int = 2016
    approveEachAction: bool = False


class MedCopilotLogic(ScriptedLoadableModuleLogic):
    """Usable without the widget: sessions on Slicer's scene, the WebServer handler, episodes."""

    def __init__(self) -> None:
        ScriptedLoadableModuleLogic.__init__(self)
        self.session: Any = None
        self.token = os.environ.get("MEDCOPILOT_TOKEN") or secrets.token_urlsafe(16)
        self.web: Any = None

    def getParameterNode(self) -> MedCopilotParameterNode:
        return MedCopilotParameterNode(super().getParameterNode())

    @staticmethod
    def ensure_dependencies() -> None:
        """Install the core into Slicer's Python (from this source tree) if it is missing."""
        try:
            import copilot  # noqa: F401
        except ImportError:
            slicer.util.pip_install(["-e", str(REPO_ROOT)])

    def open_case(self, case_dir: str, track: str = "A", trace_dir: str | None = None) -> Any:
        self.ensure_dependencies()
        from MedCopilotLib.slicer_viewer import application_viewer

        from copilot.runtime import open_session

        # the slicer backend on slicer.mrmlScene; evidence is shown as markups by open_session
        self.session = open_session(case_dir, track=track, trace_dir=trace_dir, viewer=application_viewer())
        return self.session

    def start_web_server(self, port: int = 2016) -> int:
        """Serve `/medcopilot/v1` from Slicer's WebServer (exec stays disabled); returns the port."""
        from MedCopilotLib.web_handler import make_handler
        from WebServer import WebServerLogic

        self.stop_web_server()
        self.web = WebServerLogic(
            port=port,
            enableSlicer=False,
            enableExec=False,
            enableDICOM=False,
            enableStaticPages=False,
            requestHandlers=[make_handler(self.session, self.token)],
        )
        self.web.start()
        return int(self.web.port)

    def stop_web_server(self) -> None:
        if self.web is not None:
            self.web.stop()
            self.web = None


class MedCopilotWidget(ScriptedLoadableModuleWidget, VTKObservationMixin):
    """Thin: binds the panel's widgets (Resources/UI/MedCopilot.ui) to `copilot.panel.PanelModel`."""

    def __init__(self, parent: Any = None) -> None:
        ScriptedLoadableModuleWidget.__init__(self, parent)
        VTKObservationMixin.__init__(self)
        self.logic: MedCopilotLogic | None = None
        self.model: Any = None
        self._timer = qt.QTimer()

    def setup(self) -> None:
        ScriptedLoadableModuleWidget.setup(self)
        ui_widget = slicer.util.loadUI(self.resourcePath("UI/MedCopilot.ui"))
        self.layout.addWidget(ui_widget)
        self.ui = slicer.util.childWidgetVariables(ui_widget)
        ui_widget.setMRMLScene(slicer.mrmlScene)
        self.logic = MedCopilotLogic()
        self._parameterNode = self.logic.getParameterNode()
        self._parameterNode.connectGui(self.ui)
        self.ui.openButton.connect("clicked(bool)", self.onOpen)
        self.ui.runButton.connect("clicked(bool)", self.onRun)
        self.ui.stopButton.connect("clicked(bool)", lambda _=None: self.model and self.model.stop())
        self.ui.approveButton.connect("clicked(bool)", lambda _=None: self.model and self.model.approve())
        self.ui.rejectButton.connect("clicked(bool)", lambda _=None: self.model and self.model.reject())
        self.ui.serveButton.connect("clicked(bool)", self.onServe)
        self.ui.evidenceList.connect(
            "currentRowChanged(int)", lambda row: self.model and row >= 0 and self.model.jump_to_evidence(row)
        )
        self._timer.connect("timeout()", self.refresh)  # the model's notifications come from a worker thread
        self._timer.start(200)

    def cleanup(self) -> None:
        self._timer.stop()
        if self.logic is not None:
            self.logic.stop_web_server()
        self.removeObservers()

    def onOpen(self) -> None:
        from copilot.panel.model import PanelModel

        p = self._parameterNode
        self.model = PanelModel(self.logic.open_case(p.caseDir, p.track))
        self.refresh()

    def onRun(self) -> None:
        from copilot.medflow.policies import make_policy

        if self.model is None:
            self.onOpen()
        self.model.set_approve_mode(self._parameterNode.approveEachAction)
        self.model.run_episode(make_policy(self._parameterNode.policy))

    def onServe(self) -> None:
        if self.model is None:
            self.onOpen()
        port = self.logic.start_web_server(self._parameterNode.port)
        self.ui.statusLabel.text = f"serving http://127.0.0.1:{port}/medcopilot/v1 (access_token={self.logic.token})"

    def refresh(self) -> None:
        m = self.model
        if m is None:
            return
        self.ui.timelineList.clear()
        for n, e in enumerate(m.timeline):
            self.ui.timelineList.addItem(f"{n + 1}. [{e.actor}] {e.handler} — {e.status}")
        labels = [f"{e.get('kind')}: {e.get('label', '')}" for e in m.evidence]
        if self.ui.evidenceList.count != len(labels):
            self.ui.evidenceList.clear()
            for label in labels:
                self.ui.evidenceList.addItem(label)
        self.ui.budgetBar.maximum = m.budget
        self.ui.budgetBar.value = min(m.rounds_used, m.budget)
        self.ui.chatText.plainText = "\n\n".join(f"{who}: {text}" for who, text in m.messages)
        pending = f" — waiting for approval: {m.pending.handler}" if m.pending else ""
        self.ui.statusLabel.text = f"{m.status}{pending}"


class MedCopilotTest(ScriptedLoadableModuleTest):
    """Runs the shared contract tests on Slicer's own scene inside Slicer (tests/run_in_slicer.py does the same)."""

    def runTest(self) -> None:
        import subprocess
        import sys

        MedCopilotLogic.ensure_dependencies()
        slicer.util.pip_install("pytest hypothesis")
        env = {**os.environ, "MEDCOPILOT_BACKEND": "slicer"}
        import pytest

        os.environ.update(env)
        code = pytest.main([str(REPO_ROOT / "tests" / "test_contract.py"), "-q", "-k", "local"])
        self.assertEqual(
            code, 0, f"contract tests failed in Slicer ({sys.executable}; {subprocess.list2cmdline(sys.argv)})"
        )
