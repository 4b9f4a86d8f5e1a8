"""Building sessions: the one place a `Session` is constructed (viewer of the recorded kind and backend, registry
limited to an operation set, optional trace), for batch episodes, the server, replays and the desktop alike."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import copilot
from copilot.cases.pack import CaseLike, load_case
from copilot.engine.png import PNG_ENCODER
from copilot.engine.volume.render import RENDERER, check_renderer
from copilot.errors import HandlerError
from copilot.kinds import viewer_kind
from copilot.session import Session
from copilot.tools.operation_sets import registry_view
from copilot.trace.recorder import TraceRecorder
from copilot.trace.study_ref import pseudonymous_header
from copilot.viewer.protocol import StateT, Viewer

ALLOW_STORE_ENV = "MEDCOPILOT_ALLOW_STORE"  # destinations named with --allow-store, one a line (read by workers too)


def allow_store_option(parser: argparse.ArgumentParser) -> None:
    """`--allow-store DESTINATION` on a headless command: the one way it may write outside the session."""
    parser.add_argument(
        "--allow-store", action="append", default=[], metavar="URL", type=_destination,
        help="let the agent's exports write to this destination without a clinician (a DICOMweb URL, or a folder "
        "for exported files; repeatable); without it every export is refused and nothing is written",
    )  # fmt: skip


def _destination(text: str) -> str:
    """An `--allow-store` value: an http(s) URL without credentials, a `file:` URI or a folder."""
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme.lower() in ("http", "https"):
        if parts.username or parts.password or not parts.hostname:
            raise ValueError("a URL with a host and without user:password@")
        from copilot.pacs.urls import service_root

        try:  # compared as the network sees it; a '.' or '..' segment is refused
            return service_root(text)
        except HandlerError as exc:
            raise ValueError(exc.message) from None
    if parts.scheme == "file" or not parts.scheme:
        return text
    raise ValueError(f"not an http(s) URL, a file: URI or a folder: {text!r}")


def allow_store_default() -> tuple[str, ...]:
    """The destinations `--allow-store` named for this run (none unless given): writes there need no clinician."""
    return tuple(line.strip() for line in os.environ.get(ALLOW_STORE_ENV, "").splitlines() if line.strip())


def session_header(
    case: CaseLike, track: str, ops: str | None = None, backend: str = "embedded", protocol: str | None = None
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
        "png_encoder": PNG_ENCODER,
        "renderer": RENDERER,
        "medcopilot_version": copilot.__version__,
    }


def new_session(
    kind_name: str,
    *,
    backend: str = "embedded",
    viewer: Viewer[StateT] | None = None,
    ops: str | None = None,
    track: str = "A",
    trace: TraceRecorder | None = None,
    case: CaseLike | None = None,
    case_root: Path | None = None,
    case_inputs: dict[str, Any] | None = None,
    png_encoder: str = PNG_ENCODER,
    protocol: str | None = None,
    renderer: str | None = None,
    allow_store: Sequence[str] | None = None,
) -> Session:
    """A session of a viewer kind on a backend (or on `viewer`, e.g. a live QuPath), nothing opened yet.

    A backend the kind does not have falls back to the embedded viewer (slides stay on it); `case_root` and
    `case_inputs` replace the case's own (a replay against a moved case folder); `protocol` picks the tools a
    model sees (`copilot.tools.protocols`); `renderer` names the slice renderer of a viewer that has one (a replay
    draws with the one its trace recorded); `allow_store` the destinations writes may go to without the
    clinician's consent (default: those `--allow-store` named, none otherwise).
    """
    kind = viewer_kind(kind_name)
    if viewer is None:
        viewer = kind.viewer(backend if backend in kind.backends else "embedded")
    if renderer is not None and hasattr(viewer, "renderer"):
        viewer.renderer = check_renderer(renderer)
    registry = registry_view(kind.registry, ops, protocol)
    allow = allow_store_default() if allow_store is None else tuple(allow_store)
    return Session(viewer, registry, case_root, case_inputs, track, trace, case, png_encoder, allow_store=allow)


def open_session(
    case_dir: str | Path | CaseLike,
    track: str = "A",
    trace_dir: str | Path | None = None,
    preload: bool = True,
    viewer: Viewer[StateT] | None = None,
    ops: str | None = None,
    backend: str = "embedded",
    protocol: str | None = None,
    allow_store: Sequence[str] | None = None,
    pseudonymous: bool = False,
) -> Session:
    """A session on a case pack (a folder or already read) or any study; with `preload`, the system opens its
    inputs (recorded in the trace). `pseudonymous`: the trace names the study by its reference, its path and
    inputs kept in the trace folder's owner-only sidecar (`copilot.trace.study_ref`).

    `viewer` replaces the embedded engine (e.g. a live QuPath through `qupath_ext`); otherwise `backend` picks
    the kind's viewer ("embedded", or "slicer" for radiology: Slicer's MRML libraries). `ops` limits Track B
    to one operation set (`copilot.tools.operation_sets`); `protocol` picks the tools a model sees
    (`copilot.tools.protocols`); with a protocol, the trace header lists those tools.
    """
    case: CaseLike = load_case(case_dir) if isinstance(case_dir, str | Path) else case_dir
    kind = viewer_kind(case.kind)
    backend = backend if backend in kind.backends else "embedded"  # e.g. slides stay on the embedded viewer
    if viewer is not None:  # the trace names the viewer the calls really ran on (e.g. a live QuPath)
        backend = str(getattr(viewer, "backend", backend))
    header = session_header(case, track, ops, backend, protocol)
    if protocol:
        header["tools"] = [s.name for s in registry_view(kind.registry, ops, protocol).specs(track)]
    if pseudonymous and trace_dir is not None:
        header = pseudonymous_header(header, trace_dir)
    trace = TraceRecorder(trace_dir, header) if trace_dir is not None else None
    session = new_session(case.kind, backend=backend, viewer=viewer, ops=ops, track=track, trace=trace, case=case,
                          protocol=protocol, allow_store=allow_store)  # fmt: skip
    if preload:
        outcome = session.call(kind.open_handler, {}, actor="system")
        if not outcome.ok:
            raise HandlerError(outcome.error["code"], f"cannot open {case.case_id}: {outcome.error['message']}")  # type: ignore[index]
    return session
