"""MedCopilot scripted module: the copilot panel beside Slicer's views, a Slicer backend for every handler,
and a WebServer request handler serving `/medcopilot/v1` (no code execution anywhere)."""

from __future__ import annotations

import os
import secrets
import time
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
    approveEachAction: bool = True
    baseUrl: str = ""  # the key is never a parameter: parameters are saved with the scene
    model: str = ""


class MedCopilotLogic(ScriptedLoadableModuleLogic):
    """Usable without the widget: the copilot on the clinician's scene, benchmark cases, the WebServer handler."""

    def __init__(self) -> None:
        ScriptedLoadableModuleLogic.__init__(self)
        self.session: Any = None  # a benchmark case's session
        self.host: Any = None  # the copilot on the clinician's own scene
        self.token = os.environ.get("MEDCOPILOT_TOKEN") or secrets.token_urlsafe(16)
        self.web: Any = None
        self.calls: Any = None
        from MedCopilotLib.consent import OptIn

        self.opt_in = OptIn()  # the model services the user agreed to send questions to, this session

    def getParameterNode(self) -> MedCopilotParameterNode:
        return MedCopilotParameterNode(super().getParameterNode())

    @staticmethod
    def ensure_dependencies() -> str:
        """The core in Slicer's Python: 'present', or 'installed' once the user agreed (`slicer.packaging.pip_ensure`
        on Slicer 5.11+, a confirmation and `slicer.util.pip_install` before); declined, CoreNotInstalled."""
        from MedCopilotLib.install import core_requirement, ensure_core, source_checkout

        try:
            from slicer import packaging as slicer_packaging

            pip_ensure = slicer_packaging.pip_ensure
        except ImportError:  # Slicer before 5.11
            pip_ensure = None

        def confirm(message: str, details: str) -> bool:
            title = "MedCopilot - Install Python Packages"
            return bool(slicer.util.confirmOkCancelDisplay(message, title, detailedText=details))

        requirement = core_requirement(source_checkout(__file__))
        return ensure_core(requirement, pip_ensure, confirm, slicer.util.pip_install)

    def adopt_scene(self, base_url: str = "", model: str = "", api_key: str = "", trace_dir: str | None = None) -> Any:
        """Start the copilot on the volumes, views, window/level and layout already in slicer.mrmlScene. The key
        stays in this object's memory (never in the scene, the parameter node or Slicer's settings)."""
        self.ensure_dependencies()
        from copilot.host.panel import MainThreadCalls
        from copilot.host.slicer import SlicerHost, model_settings

        self.close_session()
        self.calls = MainThreadCalls()  # the agent's calls run on Slicer's main thread (the widget's timer)
        stamp = time.strftime("session-%Y%m%d-%H%M%S")
        folder = trace_dir or str(Path(slicer.app.temporaryPath) / "MedCopilot" / stamp)
        self.host = SlicerHost.adopt(
            slicer.mrmlScene,
            slicer.app.applicationLogic(),
            folder,
            settings=lambda: model_settings(base_url, model, api_key),
            on_host=self.calls,
        )
        return self.host

    def close_session(self, remove_own_nodes: bool = False) -> None:
        """End the copilot session; the clinician's nodes stay, the copilot's own only go when asked."""
        self.opt_in.forget()
        if self.host is not None:
            conversation = self.host.conversation
            conversation.stop()
            deadline = time.monotonic() + 5.0
            while conversation.busy and time.monotonic() < deadline:  # its last calls still need this thread
                self.calls.pump()
                conversation.wait(0.05)
            self.host.close(remove_own_nodes)
            self.host = None

    def open_case(self, case_dir: str, track: str = "A", trace_dir: str | None = None) -> Any:
        """The explicit "Open benchmark case" action: a case pack opened into the scene."""
        self.ensure_dependencies()
        from copilot.host.slicer import open_benchmark_case

        self.close_session()
        self.session = open_benchmark_case(slicer.mrmlScene, slicer.app.applicationLogic(), case_dir, trace_dir, track)
        return self.session

    def start_web_server(self, port: int = 2016) -> int:
        """Serve `/medcopilot/v1` from Slicer's WebServer (exec stays disabled); returns the port."""
        from MedCopilotLib.web_handler import make_handler
        from WebServer import WebServerLogic

        self.stop_web_server()
        session = self.host.session if self.host is not None else self.session
        self.web = WebServerLogic(
            port=port,
            enableSlicer=False,
            enableExec=False,
            enableDICOM=False,
            enableStaticPages=False,
            requestHandlers=[make_handler(session, self.token)],
        )
        self.web.start()
        return int(self.web.port)

    def stop_web_server(self) -> None:
        if self.web is not None:
            self.web.stop()
            self.web = None


class MedCopilotWidget(ScriptedLoadableModuleWidget, VTKObservationMixin):
    """Thin: forwards the panel's clicks (Resources/UI/MedCopilot.ui) to the logic and copies the Qt-free panel
    state (`copilot.host.panel.panel_state`) into the widgets (`MedCopilotLib.panel_view`)."""

    def __init__(self, parent: Any = None) -> None:
        ScriptedLoadableModuleWidget.__init__(self, parent)
        VTKObservationMixin.__init__(self)
        self.logic: MedCopilotLogic | None = None
        self.model: Any = None  # a benchmark case's panel model
        self.view: Any = None
        self._timer = qt.QTimer()

    def setup(self) -> None:
        ScriptedLoadableModuleWidget.setup(self)
        from MedCopilotLib.panel_view import PanelView

        ui_widget = slicer.util.loadUI(self.resourcePath("UI/MedCopilot.ui"))
        self.layout.addWidget(ui_widget)
        self.ui = slicer.util.childWidgetVariables(ui_widget)
        ui_widget.setMRMLScene(slicer.mrmlScene)
        self.view = PanelView(self.ui)
        self.logic = MedCopilotLogic()
        self._parameterNode = self.logic.getParameterNode()
        self._parameterNode.connectGui(self.ui)
        self.ui.adoptButton.connect("clicked(bool)", self.onAdopt)
        self.ui.closeButton.connect("clicked(bool)", self.onClose)
        self.ui.askButton.connect("clicked(bool)", self.onAsk)
        self.ui.questionEdit.connect("returnPressed()", self.onAsk)
        self.ui.approveButton.connect("clicked(bool)", lambda _=None: self._conversation("approve"))
        self.ui.rejectButton.connect("clicked(bool)", self.onReject)
        self.ui.stopButton.connect("clicked(bool)", self.onStop)
        self.ui.exportButton.connect("clicked(bool)", self.onExport)
        self.ui.storeButton.connect("clicked(bool)", self.onStore)
        self.ui.evidenceList.connect("currentRowChanged(int)", self.onEvidence)
        self.ui.openButton.connect("clicked(bool)", self.onOpen)
        self.ui.runButton.connect("clicked(bool)", self.onRun)
        self.ui.serveButton.connect("clicked(bool)", self.onServe)
        self._timer.connect("timeout()", self.refresh)  # runs the agent's queued calls, then updates the panel
        self._timer.start(100)

    def cleanup(self) -> None:
        self._timer.stop()
        if self.logic is not None:
            self.logic.stop_web_server()
            self.logic.close_session()
        self.removeObservers()

    # ----- the copilot on the clinician's scene -----
    def onAdopt(self) -> None:
        p = self._parameterNode
        try:
            self.logic.adopt_scene(p.baseUrl, p.model, self.ui.apiKeyEdit.text)
        except Exception as exc:  # e.g. no volume loaded yet
            slicer.util.errorDisplay(f"Cannot start the copilot: {exc}")
        self.model = None
        self.refresh()

    def onClose(self) -> None:
        host = self.logic.host
        if host is None:
            return
        own = [n.GetName() for n in host.own_nodes()]
        remove = bool(own) and slicer.util.confirmYesNoDisplay(
            "End the copilot session. Your volumes, views and window/level stay as they are.\n\n"
            f"Also remove the copilot's own nodes ({', '.join(own)})?"
        )
        self.logic.close_session(remove_own_nodes=remove)
        self.refresh()

    def _conversation(self, action: str, *args: Any) -> None:
        if self.logic.host is not None:
            getattr(self.logic.host.conversation, action)(*args)
        elif self.model is not None and hasattr(self.model, action):
            getattr(self.model, action)()

    def onAsk(self) -> None:
        host = self.logic.host
        question = self.ui.questionEdit.text.strip()
        if host is None or not question:
            return
        from MedCopilotLib.consent import opt_in_text, service_url

        url = service_url(self._parameterNode.baseUrl, os.environ)
        if self.logic.opt_in.needed(url):  # nothing leaves until the user says yes to this service
            if not slicer.util.confirmYesNoDisplay(opt_in_text(url), windowTitle="MedCopilot - send to a model?"):
                return
            self.logic.opt_in.agree(url)
        host.conversation.approve_each = self._parameterNode.approveEachAction
        host.conversation.ask(question)
        self.ui.questionEdit.setText("")

    def onReject(self) -> None:
        self._conversation("reject", self.ui.rejectReasonEdit.text)
        self.ui.rejectReasonEdit.setText("")

    def onStop(self) -> None:
        self._conversation("stop")

    def onEvidence(self, row: int) -> None:
        if row >= 0 and self.logic.host is not None:
            self.logic.host.conversation.go_to(row)
        elif row >= 0 and self.model is not None:
            self.model.jump_to_evidence(row)

    def onExport(self) -> None:
        if self.logic.host is None:
            return
        path = qt.QFileDialog.getSaveFileName(None, "Export evidence report", "medcopilot-report.html", "HTML (*.html)")
        if path:
            self.logic.host.conversation.export_report(path)

    def onStore(self) -> None:
        """Store to PACS / Export: exactly what and where shown first; written only on Yes."""
        from copilot.host.store import host_store

        if self.logic.host is None:
            return

        def confirm(plan: Any) -> tuple[str, str]:
            yes = slicer.util.confirmYesNoDisplay(
                f"{plan.title()}: writes outside the session exactly this:", detailedText="\n\n".join(plan.lines())
            )
            return ("approve", "") if yes else ("reject", "declined in the Store dialog")

        slicer.util.infoDisplay("\n".join(host_store(self.logic.host.conversation, confirm)))
        self.refresh()

    # ----- benchmark cases -----
    def onOpen(self) -> None:
        from copilot.panel.model import PanelModel

        if self.logic.host is not None and not slicer.util.confirmYesNoDisplay(
            "Opening a benchmark case ends the copilot session on your scene and sets the views to the case's. "
            "Your volumes stay. Continue?"
        ):
            return
        p = self._parameterNode
        try:
            self.model = PanelModel(self.logic.open_case(p.caseDir, p.track))
        except Exception as exc:  # the core declined, a case folder that is not one
            slicer.util.errorDisplay(f"Cannot open the case: {exc}")
        self.refresh()

    def onRun(self) -> None:
        from copilot.medflow.policies import make_policy

        if self.model is None:
            self.onOpen()
        if self.model is None:  # the case did not open (the message said why)
            return
        from MedCopilotLib.consent import opt_in_text, service_url, uses_model

        url = service_url(self._parameterNode.baseUrl, os.environ)
        if uses_model(self._parameterNode.policy) and self.logic.opt_in.needed(url):
            if not slicer.util.confirmYesNoDisplay(opt_in_text(url), windowTitle="MedCopilot - send to a model?"):
                return
            self.logic.opt_in.agree(url)
        self.model.set_approve_mode(self._parameterNode.approveEachAction)
        self.model.run_episode(make_policy(self._parameterNode.policy))

    def onServe(self) -> None:
        if self.model is None and self.logic.host is None:
            self.onOpen()
        port = self.logic.start_web_server(self._parameterNode.port)
        self.ui.statusLabel.text = f"serving http://127.0.0.1:{port}/medcopilot/v1 (access_token={self.logic.token})"

    # ----- the panel -----
    def refresh(self) -> None:
        from copilot.host.panel import PanelState, panel_state, proposal_text

        if self.logic is None:
            return
        if self.logic.calls is not None:
            self.logic.calls.pump()
        host, m = self.logic.host, self.model
        if host is not None:
            trace = str(host.trace_path or "")
            state = panel_state(host.conversation, host.inventory_text(), trace, banner=host.banner.line)
        elif m is not None:
            pending = proposal_text(m.pending) if m.pending else ""
            self.ui.budgetBar.maximum = m.budget
            self.ui.budgetBar.value = min(m.rounds_used, m.budget)
            state = PanelState(
                m.status, f"Benchmark case {m.case.case_id}", "\n\n".join(f"{w}: {t}" for w, t in m.messages),
                [f"{n + 1}. [{e.actor}] {e.handler}: {e.status}" for n, e in enumerate(m.timeline)],
                [f"{e.get('kind')}: {e.get('label', '')}" for e in m.evidence], pending, False, m.pending is not None,
                m.status == "running", str(m.session.trace_dir or ""),
            )  # fmt: skip
        else:
            state = panel_state(None)
        self.view.apply(state)


class MedCopilotTest(ScriptedLoadableModuleTest):
    """Run by `Slicer --no-main-window --testing` (or *Reload and Test*): the core is asked for, never installed
    unasked; the copilot adopts a sample volume on Slicer's own scene, moves a view through an audited call and
    leaves the clinician's volume in place. From a source checkout, the shared contract and adopt-the-scene suites
    run too (tests/run_in_slicer.py runs the same)."""

    def setUp(self) -> None:
        slicer.mrmlScene.Clear(0)

    def runTest(self) -> None:
        self.setUp()
        self.test_the_core_is_present_and_nothing_is_asked()
        self.setUp()
        self.test_the_copilot_on_sample_data()
        from MedCopilotLib.install import source_checkout

        checkout = source_checkout(__file__)
        if checkout is not None:
            self.test_the_shared_suites(checkout)

    def test_the_core_is_present_and_nothing_is_asked(self) -> None:
        from MedCopilotLib.install import ensure_core

        asked: list[str] = []
        state = ensure_core("medcopilot", lambda *a, **k: asked.append("pip_ensure"),
                            lambda m, d: bool(asked.append(m)), asked.append)  # fmt: skip
        self.assertEqual(MedCopilotLogic.ensure_dependencies(), "present")
        self.assertEqual((state, asked), ("present", []))

    def _sample_volume(self) -> Any:
        """MRHead from Slicer's sample data; offline, a synthetic head-sized volume instead."""
        try:
            import SampleData

            return SampleData.downloadSample("MRHead")
        except Exception as exc:  # no network on this machine
            import numpy as np

            self.delayDisplay(f"sample data unavailable ({exc}): a synthetic volume instead")
            data = np.zeros((40, 64, 64), dtype=np.int16)
            data[10:30, 16:48, 16:48] = 400
            return slicer.util.addVolumeFromArray(data, name="MRHead")

    def test_the_copilot_on_sample_data(self) -> None:
        volume = self._sample_volume()
        logic = MedCopilotLogic()
        host = logic.adopt_scene(trace_dir=str(Path(slicer.app.temporaryPath) / "MedCopilotTest" / "trace"))
        try:
            rng = host.session.call("get_slice_offset_range", {"view": "red"}, actor="clinician")
            self.assertTrue(rng.ok, rng.error)
            middle = (rng.result["min"] + rng.result["max"]) / 2
            moved = host.session.call("set_slice_offset", {"view": "red", "offset": middle, "size": 64},
                                      actor="clinician")  # fmt: skip
            self.assertTrue(moved.ok, moved.error)
            offsets = [host.viewer.scene.GetNthNodeByClass(i, "vtkMRMLSliceNode").GetSliceOffset()
                       for i in range(host.viewer.scene.GetNumberOfNodesByClass("vtkMRMLSliceNode"))]  # fmt: skip
            self.assertTrue(any(abs(o - moved.state["views"]["red"]["offset"]) < 1e-3 for o in offsets), offsets)
            refused = host.session.call("set_slice_offset", {"view": "red", "offset": 1e9}, actor="clinician")
            self.assertEqual(refused.error["code"] if refused.error else "", "offset_out_of_range")
            self.assertEqual([v.node_id for v in host.volumes], [volume.GetID()])
        finally:
            logic.close_session(remove_own_nodes=True)
        self.assertIsNotNone(slicer.mrmlScene.GetNodeByID(volume.GetID()))  # the clinician's volume stays
        self.assertIsNone(logic.host)

    def test_the_shared_suites(self, checkout: Path) -> None:
        import subprocess
        import sys

        slicer.util.pip_install("pytest hypothesis")
        import pytest

        os.environ["MEDCOPILOT_BACKEND"] = "slicer"
        code = pytest.main([str(checkout / "tests" / "test_contract.py"), "-q", "-k", "local"])
        self.assertEqual(
            code, 0, f"contract tests failed in Slicer ({sys.executable}; {subprocess.list2cmdline(sys.argv)})"
        )
        # the copilot adopting the application's own scene (a volume loaded with Slicer's reader, the user's views)
        code = pytest.main([str(checkout / "tests" / "test_slicer_host.py"), "-q", "-p", "no:cacheprovider"])
        self.assertEqual(code, 0, "the adopt-the-scene tests failed in Slicer")
