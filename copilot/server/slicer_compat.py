"""The read-only subset of 3D Slicer's WebServer `/slicer` API that existing clients use.

`/slicer/slice` renders a view at the requested orientation/offset/size without moving the
viewer (the agent's state stays what the audited handlers made it); unlike Slicer's own module
it honours `offset=0` and `size`. Its `offset` is Slicer's native slice offset (along Slicer's slice
normal, so a sagittal offset is −R), as Slicer's WebServer reads it; the handlers' canonical offsets
are converted in `copilot.engine.geometry`. Requests are logged in the trace as reads.
"""

from __future__ import annotations

import json
import math

import numpy as np
from PIL import Image

import copilot
from copilot.engine.geometry import VIEW_NAMES, SliceView, canonical_offset
from copilot.engine.volume.render import encode_png
from copilot.errors import HandlerError
from copilot.session import Peek, Session

ORIENTATIONS = ("axial", "sagittal", "coronal")
MAX_SIZE = 2048


def _one(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0].strip() if values else None


def _number(query: dict[str, list[str]], key: str) -> float | None:
    raw = _one(query, key)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise HandlerError("invalid_arguments", f"{key} must be a number") from None
    if not math.isfinite(value):
        raise HandlerError("invalid_arguments", f"{key} must be finite")
    return value


class SlicerCompat:
    """Answers `/slicer/...` GET requests from a session, never changing its state."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def handle(self, path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        route = path.rstrip("/")
        self.session.note("slicer_read", {"path": route, "query": query})
        if route == "/slicer/slice":
            return 200, "image/png", self._slice(query)
        if route == "/slicer/screenshot":
            return 200, "image/png", self._screenshot(query)
        if route in ("/slicer/volumes", "/slicer/mrml/names", "/slicer/mrml/ids"):
            volumes = self.session.snapshot()["volumes"]
            if route == "/slicer/volumes":
                return 200, "application/json", json.dumps(volumes).encode()
            nodes = [(v["id"], v["name"]) for v in volumes]
            nodes += [(f"vtkMRMLSliceNode{v.capitalize()}", v.capitalize()) for v in VIEW_NAMES]
            pick = 1 if route.endswith("names") else 0
            return 200, "application/json", json.dumps([n[pick] for n in nodes]).encode()
        if route == "/slicer/system/version":
            info = {
                "applicationName": "MedCopilot",
                "applicationVersion": copilot.__version__,
                "compatibleWith": "3D Slicer WebServer (read-only subset)",
            }
            return 200, "application/json", json.dumps(info).encode()
        raise HandlerError("not_found", f"{route} is not served (read-only Slicer subset)", status=404)

    def _slice(self, query: dict[str, list[str]]) -> bytes:
        view = (_one(query, "view") or "red").lower()
        if view not in VIEW_NAMES:
            raise HandlerError("invalid_arguments", f"view must be one of {VIEW_NAMES}")
        orientation = (_one(query, "orientation") or "").lower() or None
        if orientation is not None and orientation not in ORIENTATIONS:
            raise HandlerError("invalid_arguments", f"orientation must be one of {ORIENTATIONS}")
        offset, scroll_to, size = _number(query, "offset"), _number(query, "scrollTo"), _number(query, "size")
        side = int(size) if size is not None else 512
        if not 16 <= side <= MAX_SIZE:
            raise HandlerError("invalid_arguments", f"size must lie in [16, {MAX_SIZE}]")
        if offset is not None:  # Slicer's own offset, along Slicer's slice normal (sagittal: L): made canonical
            offset = canonical_offset(orientation or self.session.view_geometry(view, SliceView).orientation, offset)
        peek = Peek((view,), (side, side), orientation=orientation, offset=offset, scroll_to=scroll_to)
        images = self.session.peek(peek) or {}
        if view not in images:
            raise HandlerError("no_volume", "no volume is loaded")
        return encode_png(images[view])

    def _screenshot(self, query: dict[str, list[str]]) -> bytes:
        size = _number(query, "size")
        side = int(size) if size is not None else 384
        if not 16 <= side <= MAX_SIZE:
            raise HandlerError("invalid_arguments", f"size must lie in [16, {MAX_SIZE}]")
        images = self.session.peek(Peek((), (side, side))) or {}
        if not images:
            raise HandlerError("no_volume", "no volume is loaded")
        return encode_png(Image.fromarray(np.concatenate([np.asarray(im) for im in images.values()], axis=1)))
