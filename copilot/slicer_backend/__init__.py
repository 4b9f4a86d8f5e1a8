"""The `slicer` radiology backend: the handlers' viewer on 3D Slicer's own MRML scene and slice logics.

It runs standalone on the `slicer-core` wheel (Slicer's Qt-free MRML and logic libraries; its own scene,
application logic and Red/Yellow/Green slice logics) and inside the Slicer application on
`slicer.mrmlScene`. Nothing here is imported unless the backend is chosen, so the core never needs
slicer-core; `available()` says whether it is installed.
"""

from __future__ import annotations

import importlib.util
from typing import Any

BACKENDS = ("embedded", "slicer")


def available() -> bool:
    """Whether slicer-core (and its VTK) can be imported."""
    return importlib.util.find_spec("slicer_core") is not None and importlib.util.find_spec("vtkmodules") is not None


def slicer_viewer() -> Any:
    """The `slicer` backend's viewer for a new session, or a clear error when slicer-core is missing."""
    if not available():
        from copilot.errors import HandlerError

        raise HandlerError("backend_unavailable", "the slicer backend needs slicer-core: pip install '.[slicer]'")
    return new_slicer_viewer()


def new_slicer_viewer(scene: Any = None, app_logic: Any = None) -> Any:
    """A `SlicerSceneViewer`: on a fresh standalone scene, or on a given scene and application logic."""
    from copilot.slicer_backend.viewer import SlicerSceneViewer

    return SlicerSceneViewer(scene, app_logic)
