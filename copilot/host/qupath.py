"""The copilot on the image a pathologist already has open in QuPath (Qt-free logic; the Py4J side is
`qupath_ext.open_image`). The session opens on the image as it is (no case pack, nothing loaded or closed); after
every answer the places it cites — points, and regions where the model gives them — are written into the
image's object hierarchy as locked "MedCopilot evidence" annotations, and the write is recorded in the trace."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from copilot.agent.loop import ChatAgent
from copilot.cases.pack import CasePack
from copilot.errors import HandlerError
from copilot.host.apps import QUPATH
from copilot.host.conversation import HostConversation, direct, scrubbed
from copilot.host.slicer import model_settings
from copilot.pacs.patient import study_facts
from copilot.panel import optin
from copilot.panel.banner import Banner, banner_from_facts
from copilot.runtime import new_session, session_header
from copilot.session import Session
from copilot.trace.recorder import TraceRecorder

HOST_MODULE = QUPATH.module  # resources/prompts/host_pathology.txt
WRITTEN_EVENT, WRITE_FAILED_EVENT = "host_evidence_written", "host_evidence_failed"


def _last_json_object(text: str) -> dict[str, Any]:
    """The last JSON object in a text ({} when there is none)."""
    decoder = json.JSONDecoder()
    found: dict[str, Any] = {}
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found = obj
        i = text.find("{", end)
    return found


def slide_citations(answer: str, kind: str = "pathology") -> list[dict[str, Any]]:
    """The points (`localizations`) and regions an answer's JSON cites, with the labels the model gave."""
    obj = _last_json_object(answer)
    out: list[dict[str, Any]] = []
    for n, p in enumerate(obj.get("localizations") or []):
        if isinstance(p, dict) and isinstance(p.get("x"), int | float) and isinstance(p.get("y"), int | float):
            label = str(p.get("label") or f"answer point {n + 1}")[:120]
            out.append({"kind": "wsi_point", "label": label, "point": {"x": float(p["x"]), "y": float(p["y"])},
                        "source": "answer"})  # fmt: skip
    for n, r in enumerate(obj.get("regions") or []):
        keys = ("x", "y", "width", "height")
        if isinstance(r, dict) and all(isinstance(r.get(k), int | float) for k in keys):
            label = str(r.get("label") or f"answer region {n + 1}")[:120]
            box = {k: float(r[k]) for k in keys}
            centre = [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2]
            out.append({"kind": "wsi_region", "label": label, **box, "center": centre, "source": "answer"})
    return out


class PathologyHost:
    """One copilot session on the image open in QuPath: conversation, evidence written back, trace."""

    def __init__(
        self,
        session: Session,
        conversation: HostConversation,
        image_facts: dict[str, Any],
        write_evidence: Callable[[list[dict[str, Any]]], list[str]],
    ) -> None:
        self.session, self.conversation, self.image_facts = session, conversation, image_facts
        self.write_evidence = write_evidence
        self.written: list[dict[str, Any]] = []  # evidence items now in QuPath, with QuPath's object ids
        self.errors: list[str] = []
        conversation.listeners.append(self._on_event)

    @functools.cached_property
    def banner(self) -> Banner:
        """The patient banner of the open image (a DICOM whole-slide file's headers; other slide files name no
        patient): for the pathologist's eyes only, never sent to the model."""
        path = Path(str(self.image_facts.get("path") or "").removeprefix("file:"))
        facts = study_facts(path.parent, {"slide": path.name}) if path.is_file() else None
        return banner_from_facts(facts, str(self.image_facts.get("name") or path.name or "the image open in QuPath"))

    @classmethod
    def adopt(
        cls,
        viewer: Any,
        image_facts: dict[str, Any],
        write_evidence: Callable[[list[dict[str, Any]]], list[str]],
        trace_dir: str | Path | None = None,
        settings: Callable[[], Any] | None = None,
        client: Any = None,
        on_host: Callable[[Callable[[], Any]], Any] | None = None,
        budget: int = 12,
    ) -> PathologyHost:
        """A session on the open image; HandlerError `no_image` when QuPath shows none."""
        if not viewer.has_image():
            raise HandlerError("no_image", "no image is open in QuPath: open one there first")
        tdir = Path(trace_dir) if trace_dir is not None else None
        study = CasePack(tdir or Path.cwd(), "qupath-image", HOST_MODULE, {}, {}, "pathology")
        trace = TraceRecorder(tdir, session_header(study, "A", backend="qupath")) if tdir is not None else None
        session = new_session("pathology", viewer=viewer, trace=trace, case=study, case_inputs={})
        QUPATH.offer(session)
        session.note("image_adopted", {k: image_facts.get(k) for k in ("dimensions", "mpp", "levels")})
        make = settings or model_settings
        made: list[PathologyHost] = []  # the host, once built: its banner names what requests must not carry
        url = lambda: optin.service_url(make())  # noqa: E731  (nothing goes there before the clinician's yes)
        agent = scrubbed(lambda: ChatAgent(make(), client=client), lambda: made[0].banner.facts if made else None, url,
                         session.note)  # fmt: skip
        conversation = HostConversation(session, study, agent, budget=budget, on_host=on_host or direct,
                                        cites=slide_citations)  # fmt: skip
        conversation.service_url = url
        made.append(cls(session, conversation, image_facts, write_evidence))
        return made[0]

    @property
    def trace_path(self) -> Path | None:
        return self.session.trace_dir

    def _on_event(self, what: str) -> None:
        if what == "answer":
            self.write_new()

    def write_new(self) -> list[str]:
        """Write the evidence not yet in QuPath; a refusal is recorded and shown, and nothing is written."""
        items = [ev for ev in self.conversation.evidence if ev not in [w["item"] for w in self.written]]
        items = [ev for ev in items if isinstance(ev.get("point"), dict) or ev.get("kind") == "wsi_region"]
        if not items:
            return []
        try:
            ids = self.conversation.on_host(lambda: self.write_evidence(items))
        except HandlerError as exc:
            self.errors.append(f"{exc.code}: {exc.message}")
            self.session.note(WRITE_FAILED_EVENT, {"error": exc.to_json(), "items": items})
            return []
        self.written.extend({"item": ev, "qupath_id": qid} for ev, qid in zip(items, ids, strict=True))
        self.session.note(WRITTEN_EVENT, {"items": items, "class": "MedCopilot evidence"})
        return list(ids)

    def close(self) -> None:
        """End the session; the annotations stay on the image for the pathologist."""
        self.conversation.stop()
        self.conversation.wait(5.0)
        self.session.close({"status": "closed", "turns": len(self.conversation.turns)})


def adopt_open_image(
    viewer: Any,
    trace_dir: str | Path | None = None,
    settings: Callable[[], Any] | None = None,
    client: Any = None,
    on_host: Callable[[Callable[[], Any]], Any] | None = None,
    budget: int = 12,
) -> PathologyHost:
    """A session on the image open in QuPath's current viewer (a `qupath_ext.open_image.OpenImageViewer`), its
    evidence written back into the image as annotations."""
    from qupath_ext.evidence import EvidenceWriter, marks

    writer = EvidenceWriter(viewer)
    return PathologyHost.adopt(
        viewer,
        image_facts=viewer.image_facts(),
        write_evidence=lambda evidence: [str(o.getID().toString()) for o in writer.write(marks(evidence))],
        trace_dir=trace_dir,
        settings=settings,
        client=client,
        on_host=on_host,
        budget=budget,
    )
