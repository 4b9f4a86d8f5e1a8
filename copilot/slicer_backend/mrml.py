"""Where Slicer's MRML classes come from: the application's `slicer` module when running inside 3D Slicer,
the slicer-core wheel otherwise. Both expose the same class names (vtkMRMLScene, vtkMRMLSliceLogic, ...)."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any


def application() -> ModuleType | None:
    """The Slicer application's `slicer` module when this process is 3D Slicer (it is imported at start-up
    and has `app` and `mrmlScene`; slicer-core's `slicer` namespace package has neither)."""
    module = sys.modules.get("slicer")
    if module is not None and hasattr(module, "app") and hasattr(module, "mrmlScene"):
        return module
    return None


def mrml() -> Any:
    """The module holding Slicer's MRML and logic classes."""
    app = application()
    if app is not None:
        return app
    import slicer_core

    return slicer_core
