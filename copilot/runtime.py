"""Building sessions for a case: viewer + registry + optional trace, with the case preloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import copilot
from copilot.cases.pack import CasePack, load_case
from copilot.errors import HandlerError
from copilot.kinds import viewer_kind
from copilot.session import Session
from copilot.tools.operation_sets import registry_view
from copilot.trace.recorder import TraceRecorder


def session_header(
    case: CasePack, track: str, ops: str | None = None, backend: str = "embedded", protocol: str | None = None
) -> dict[str, Any]:
    """What a replay needs to rebuild the same session."""
    return {
        "backend": backend,
        "case_id": case.case_id,
        "module": case.module,
        "kind": case.kind,
        "case_root": str(case.root),
        "case_inputs": case.inputs,
        "track": track,
        **({"ops": ops} if ops else {}),
        **({"protocol": protocol} if protocol else {}),
        "medcopilot_version": copilot.__version__,
    }


def open_session(
    case_dir: str | Path | CasePack,
    track: str = "A",
    trace_dir: str | Path | None = None,
    preload: bool = True,
    viewer: Any = None,
    ops: str | None = None,
    backend: str = "embedded",
    protocol: str | None = None,
) -> Session:
    """A session on a case; with `preload`, the system opens the case's inputs (recorded in the trace).

    `viewer` replaces the embedded engine (e.g. a live QuPath through `qupath_ext`); otherwise `backend` picks
    the kind's viewer ("embedded", or "slicer" for radiology: Slicer's MRML libraries). `ops` limits Track B
    to one operation set (`copilot.tools.operation_sets`); `protocol` picks the tools a model sees
    (`copilot.tools.protocols`); with a protocol, the trace header lists those tools.
    """
    case = case_dir if isinstance(case_dir, CasePack) else load_case(case_dir)
    kind = viewer_kind(case.kind)
    backend = backend if backend in kind.backends else "embedded"  # e.g. slides stay on the embedded viewer
    viewer = viewer if viewer is not None else kind.viewer(backend)
    header = session_header(case, track, ops, backend, protocol)
    registry = registry_view(kind.registry, ops, protocol)
    if protocol:
        header["tools"] = [s.name for s in registry.specs(track)]
    trace = TraceRecorder(trace_dir, header) if trace_dir is not None else None
    session = Session(viewer, registry, track=track, trace=trace, case=case)
    if hasattr(viewer, "show_evidence"):  # a Slicer scene: evidence is shown as markups
        viewer.show_evidence(session.evidence)
    if preload:
        outcome = session.call(kind.open_handler, {}, actor="system")
        if not outcome.ok:
            raise HandlerError(outcome.error["code"], f"cannot open case {case.root}: {outcome.error['message']}")  # type: ignore[index]
    return session
