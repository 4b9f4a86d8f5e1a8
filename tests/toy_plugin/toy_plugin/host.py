"""The `toyview` host application: a picture program the copilot attaches to. Its "running instance" is the picture
file it shows (the address); the side panel here is headless: it adopts the picture, lets the clinician zoom once
and writes what the session offers (handlers, prompt) to the screenshot path, so a test reads it back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from copilot.cases.pack import CasePack
from copilot.host.apps import HostApp
from copilot.resources import prompt_template
from copilot.runtime import new_session, session_header
from copilot.session import Session
from copilot.tools.registry import HandlerOutput, Registry
from copilot.trace.recorder import TraceRecorder
from toy_plugin.kind import Context, PictureViewer

HOST_HANDLERS = Registry("toy")


@HOST_HANDLERS.handler(role="viewer_control")
def picture_size(ctx: Context) -> HandlerOutput:
    """The size of the picture open in the toy program (read-only)."""
    assert ctx.viewer.pixels is not None
    return HandlerOutput({"shape": list(ctx.viewer.pixels.shape)})


def connect(address: str) -> PictureViewer:
    """The toy program 'running' on the picture file `address`: a viewer already showing it."""
    viewer = PictureViewer()
    viewer.pixels = np.asarray(Image.open(address).convert("L"))
    return viewer


def adopt(viewer: PictureViewer, trace_dir: str | Path) -> Session:
    """A session on the picture as the clinician left it, offering what this host offers."""
    study = CasePack(Path(trace_dir), "toyview-picture", HOST.module, {}, {}, "toy")
    trace = TraceRecorder(Path(trace_dir), session_header(study, "A", backend="toyview"))
    session = new_session("toy", viewer=viewer, trace=trace, case=study, case_inputs={})
    HOST.offer(session)
    return session


def panel(address: str, trace_dir: str | None, screenshot: str | None) -> int:
    """`medcopilot gui --attach toyview`: adopt, one clinician zoom, and the session's offer written out."""
    session = adopt(connect(address), trace_dir or "toyview-trace")
    zoomed = session.call("zoom_picture", {"factor": 2.0}, actor="clinician")
    offered = sorted(spec.name for spec in session.registry.specs("A"))
    out = {"offered": offered, "prompt": prompt_template(HOST.module), "zoom_ok": zoomed.ok}
    session.close({"status": "closed"})
    Path(screenshot or "toyview.json").write_text(json.dumps(out), encoding="utf-8")
    return 0


HOST = HostApp(
    name="toyview",
    title="Toy picture program",
    kind="toy",
    hidden=frozenset({"open_picture"}),  # it would replace the picture the clinician has open
    handlers="toy_plugin.host:HOST_HANDLERS",
    prompt=Path(__file__).with_name("host_prompt.txt"),
    panel="toy_plugin.host:panel",
    connect="toy_plugin.host:connect",
)
