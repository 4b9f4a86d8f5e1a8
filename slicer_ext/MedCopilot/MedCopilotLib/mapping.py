"""Slicer-independent facts about the extension (importable without Slicer, so tested here).

The viewer itself is the core's `slicer` backend (`copilot.slicer_backend`); its layout ids, colour node
ids and compositing modes live there. What serves each handler (Slicer's libraries or the project's
code) is `copilot.slicer_backend.handlers.HANDLER_IMPLEMENTATION`, also listed in the README. See
docs/slicer.md for every Slicer API with its source location.
"""

from __future__ import annotations

from copilot.slicer_backend.handlers import HANDLER_IMPLEMENTATION

# Python packages the module installs into Slicer's Python (slicer.util.pip_install), core first.
PIP_REQUIREMENTS = ("medcopilot", "pydantic>=2.6", "SimpleITK>=2.3", "pydicom>=2.4", "highdicom>=0.22")

__all__ = ["HANDLER_IMPLEMENTATION", "PIP_REQUIREMENTS"]
