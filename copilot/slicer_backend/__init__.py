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
    """Whether Slicer's MRML libraries can be used: inside 3D Slicer, or with slicer-core installed."""
    from copilot.slicer_backend.mrml import application

    if application() is not None:
        return True
    return importlib.util.find_spec("slicer_core") is not None and importlib.util.find_spec("vtkmodules") is not None


def slicer_viewer() -> Any:
    """The `slicer` backend's viewer for a new session, or a clear error when slicer-core is missing."""
    if not available():
        from copilot.errors import HandlerError

        raise HandlerError("backend_unavailable", "the slicer backend needs slicer-core: pip install '.[slicer]'")
    return new_slicer_viewer()


def new_slicer_viewer(scene: Any = None, app_logic: Any = None) -> Any:
    """A `SlicerSceneViewer` on a given scene and application logic; by default the application's own
    scene inside 3D Slicer, a fresh standalone scene elsewhere."""
    from copilot.slicer_backend.mrml import application
    from copilot.slicer_backend.viewer import SlicerSceneViewer

    app = application()
    if scene is None and app is not None:
        scene, app_logic = app.mrmlScene, app.app.applicationLogic()
    return SlicerSceneViewer(scene, app_logic)
