"""Slicer-independent facts about the extension (importable without Slicer, so tested here).

The viewer itself is the core's `slicer` backend (`copilot.slicer_backend`); its layout ids, colour node
ids and compositing modes live there. What serves each handler (Slicer's libraries or the project's
code) is `copilot.slicer_backend.handlers.HANDLER_IMPLEMENTATION`, also listed in the README. See
docs/slicer.md for every Slicer API with its source location.
"""

from __future__ import annotations

from copilot.slicer_backend.handlers import HANDLER_IMPLEMENTATION

__all__ = ["HANDLER_IMPLEMENTATION"]  # the core and what it needs are installed by `install.py`, after asking
