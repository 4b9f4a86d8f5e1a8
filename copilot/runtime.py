"""Building sessions for a case: viewer + registry + optional trace, with the case preloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import copilot
from copilot.cases.pack import CasePack, load_case
from copilot.engine.slide_viewer import EmbeddedSlideViewer
from copilot.engine.viewer import EmbeddedVolumeViewer
from copilot.errors import HandlerError
from copilot.session import Session
from copilot.tools import PATHOLOGY, RADIOLOGY, Registry
from copilot.trace.recorder import TraceRecorder

OPEN_HANDLER = {"radiology": "open_case", "pathology": "load_case"}


def new_viewer(kind: str) -> Any:
    """A fresh embedded viewer for a case kind."""
    if kind == "radiology":
        return EmbeddedVolumeViewer()
    if kind == "pathology":
        return EmbeddedSlideViewer()
    raise ValueError(f"no embedded viewer for {kind!r} cases")


def registry_for(kind: str) -> Registry:
    """The handler registry of a case kind."""
    registries = {"radiology": RADIOLOGY, "pathology": PATHOLOGY}
    if kind not in registries:
        raise ValueError(f"no handler registry for {kind!r} cases")
    return registries[kind]


def session_header(case: CasePack, track: str) -> dict[str, Any]:
    """What a replay needs to rebuild the same session."""
    return {
        "case_id": case.case_id,
        "module": case.module,
        "kind": case.kind,
        "case_root": str(case.root),
        "case_inputs": case.inputs,
        "track": track,
        "medcopilot_version": copilot.__version__,
    }


def open_session(
    case_dir: str | Path,
    track: str = "A",
    trace_dir: str | Path | None = None,
    preload: bool = True,
    viewer: Any = None,
) -> Session:
    """A session on a case; with `preload`, the system opens the case's inputs (recorded in the trace).

    `viewer` replaces the embedded engine (e.g. a live QuPath through `qupath_ext`).
    """
    case = load_case(case_dir)
    trace = TraceRecorder(trace_dir, session_header(case, track)) if trace_dir is not None else None
    viewer = viewer if viewer is not None else new_viewer(case.kind)
    session = Session(viewer, registry_for(case.kind), case.root, case.inputs, track, trace)
    if preload:
        outcome = session.call(OPEN_HANDLER[case.kind], {}, actor="system")
        if not outcome.ok:
            raise HandlerError(outcome.error["code"], f"cannot open case: {outcome.error['message']}")  # type: ignore[index]
    return session
