"""The `toy_zoom` Track B operation set: the picture zoom as the only operator a run may call."""

from __future__ import annotations

from copilot.tools.operation_sets import OperationSet

TOY_ZOOM = OperationSet("toy_zoom", "Zoom only", frozenset({"zoom_picture"}), order=60)
