"""The copilot on the study a radiologist already has open in 3D Slicer (Qt-free logic of the module's panel).

`SlicerHost.adopt` opens a session on the scene as it is: the volume nodes the clinician loaded (with Slicer's
DICOM browser or readers), their window/level, the Red/Yellow/Green slice nodes and the layout are the
starting state; nothing is cleared or reset. The model knows the volumes by modality and series only
(`copilot.slicer_backend.adopt`). The agent's evidence appears as locked markups in a "MedCopilot evidence"
node; ending the session leaves every node where it is, and only the copilot's own nodes may be removed,
after the clinician agrees. The same code runs on slicer-core's standalone scene and on `slicer.mrmlScene`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from copilot.agent.loop import ChatAgent
from copilot.agent.settings import AgentSettings
from copilot.cases.pack import CasePack
from copilot.errors import HandlerError
from copilot.host.apps import SLICER
from copilot.host.conversation import HostConversation, direct, scrubbed
from copilot.pacs.patient import facts_from_headers
from copilot.panel.banner import Banner, banner_from_facts
from copilot.runtime import new_session, open_session, session_header
from copilot.session import Session
from copilot.slicer_backend.adopt import (
    ADOPTED_EVENT,
    SceneVolume,
    adoption_record,
    dicom_attributes,
    scene_volumes,
    skipped_volumes,
)
from copilot.slicer_backend.markups import EvidenceMarkups
from copilot.slicer_backend.viewer import OWNER_ATTR, SlicerSceneViewer
from copilot.trace.recorder import TraceRecorder

HOST_MODULE = SLICER.module  # resources/prompts/host_radiology.txt


def model_settings(base_url: str = "", model: str = "", api_key: str = "") -> AgentSettings:
    """Settings from the panel's fields over the environment's; a key typed in the panel lives only in memory."""
    return AgentSettings.from_env(base_url=base_url or None, model=model or None, api_key=api_key or None)


def other_patient(scene: Any, volumes: list[Any]) -> str | None:
    """Which patient fields differ between the scene's volumes filed by Slicer's DICOM import (None: one patient;
    volumes without DICOM attributes are not compared)."""
    from copilot.panel.same_patient import mismatch

    facts = [facts_from_headers([SimpleNamespace(**a)]) for v in volumes if (a := dicom_attributes(scene, v.node_id))]
    for each in facts[1:]:
        found = mismatch(facts[0], each)
        if found is not None:
            return ", ".join(found.differs)
    return None


class SlicerHost:
    """One copilot session on a clinician's Slicer scene: its conversation, evidence markups and trace."""

    def __init__(
        self,
        viewer: SlicerSceneViewer,
        session: Session,
        volumes: list[SceneVolume],
        conversation: HostConversation,
        markups: EvidenceMarkups,
    ) -> None:
        self.viewer, self.session, self.volumes = viewer, session, volumes
        self.conversation, self.markups = conversation, markups
        self.closed = False

    @classmethod
    def adopt(
        cls,
        scene: Any,
        app_logic: Any,
        trace_dir: str | Path | None = None,
        settings: Callable[[], AgentSettings] = model_settings,
        client: Any = None,
        on_host: Callable[[Callable[[], Any]], Any] = direct,
        budget: int = 12,
    ) -> SlicerHost:
        """A session on the scene as the clinician left it; HandlerError when it holds no volume."""
        volumes = scene_volumes(scene)
        if not volumes:
            raise HandlerError("no_volume", "the scene holds no scalar volume: load a study in Slicer first")
        other = other_patient(scene, volumes)
        if other is not None:  # one patient per session: the banner names one, the scrub removes one's identifiers
            raise HandlerError("other_patient", f"the scene holds volumes of different patients ({other} differ): "
                               "close the other patient's volumes in Slicer, then start the copilot again")  # fmt: skip
        viewer = SlicerSceneViewer(scene, app_logic, adopt=True)
        for v in volumes:
            viewer.adopt_volume_node(scene.GetNodeByID(v.node_id), v.modality, v.name, keep_display=True)
        tdir = Path(trace_dir) if trace_dir is not None else None
        study = CasePack(tdir or Path.cwd(), "slicer-scene", HOST_MODULE, {}, {}, "radiology")
        trace = TraceRecorder(tdir, session_header(study, "A", backend="slicer")) if tdir is not None else None
        session = new_session("radiology", viewer=viewer, trace=trace, case=study, case_inputs={})
        SLICER.offer(session)
        session.note(ADOPTED_EVENT, adoption_record(viewer, volumes, tdir))
        made: list[SlicerHost] = []  # the host, once built: its banner names what requests must not carry
        agent = scrubbed(lambda: ChatAgent(settings(), client=client), lambda: made[0].banner.facts if made else None)
        conversation = HostConversation(session, study, agent, budget=budget, on_host=on_host)
        markups = viewer.evidence_markups()  # the session shows its evidence; the answers' points join it
        markups.extra = lambda: conversation.answer_items
        markups.session_id = str(round(time.time() * 1000))
        made.append(cls(viewer, session, volumes, conversation, markups))
        return made[0]

    # ----- what the panel shows -----
    @property
    def trace_path(self) -> Path | None:
        return self.session.trace_dir

    @functools.cached_property
    def banner(self) -> Banner:
        """The patient banner of the adopted volumes, from what Slicer's DICOM import filed for their series, study
        and patient; for the clinician's eyes only (the model knows the volumes by modality and series)."""
        attrs = [dicom_attributes(self.viewer.scene, v.node_id) for v in self.volumes]
        facts = facts_from_headers([SimpleNamespace(**a) for a in attrs if a])
        return banner_from_facts(facts, "volumes in this Slicer scene")

    def inventory_text(self) -> list[str]:
        """The adopted volumes as the model knows them, then the volume nodes left out and why."""
        skipped = [f"not used: {name} ({why})" for name, why in skipped_volumes(self.viewer.scene)]
        return [f"{v.name} ({v.modality})" for v in self.volumes] + skipped

    def own_nodes(self) -> list[Any]:
        """Nodes the copilot made in this scene: evidence markups, derived volumes, segments, transforms."""
        scene = self.viewer.scene
        made = [scene.GetNthNode(i) for i in range(scene.GetNumberOfNodes())]
        return [*self.markups.nodes(), *(n for n in made if n.GetAttribute(OWNER_ATTR) == "1")]

    # ----- ending -----
    def close(self, remove_own_nodes: bool = False) -> None:
        """End the session: the trace is closed, the clinician's nodes stay as they are; the copilot's own nodes
        are removed only when the clinician said so."""
        if self.closed:
            return
        self.conversation.stop()
        self.conversation.wait(5.0)
        self.session.close({"status": "closed", "turns": len(self.conversation.turns)})
        self.viewer.stop_showing_evidence()
        if remove_own_nodes:
            scene = self.viewer.scene
            for node in self.own_nodes():
                extra = [node.GetNthDisplayNode(i) for i in range(node.GetNumberOfDisplayNodes())]
                extra.append(node.GetStorageNode() if hasattr(node, "GetStorageNode") else None)
                scene.RemoveNode(node)
                for d in extra:
                    if d is not None and scene.GetNodeByID(d.GetID()) is not None:
                        scene.RemoveNode(d)
        self.closed = True


def open_benchmark_case(
    scene: Any, app_logic: Any, case_dir: str | Path, trace_dir: str | Path | None = None, track: str = "A"
) -> Session:
    """The explicit "Open benchmark case" action: a case pack opened into the scene (its own nodes replace an
    earlier case's; the clinician's nodes are not touched, the views are set to the case's standard views)."""
    from copilot.slicer_backend import new_slicer_viewer

    return open_session(case_dir, track=track, trace_dir=trace_dir, viewer=new_slicer_viewer(scene, app_logic))
