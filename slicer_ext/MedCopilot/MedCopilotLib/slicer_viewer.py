"""The extension's viewer: the project's `slicer` backend (`copilot.slicer_backend.SlicerSceneViewer`) on
the application's own scene — `slicer.mrmlScene`, the layout's Red/Yellow/Green slice logics, the
composite, display, layout, segmentation, transform and markups nodes — so handlers behave inside Slicer
exactly as in headless batch on slicer-core, with the same code."""

from __future__ import annotations

from typing import Any

import slicer

from copilot.slicer_backend import new_slicer_viewer


def application_viewer() -> Any:
    """A viewer on slicer.mrmlScene and the application logic's slice logics."""
    return new_slicer_viewer(slicer.mrmlScene, slicer.app.applicationLogic())


def adopt_loaded_volumes(viewer: Any) -> list[str]:
    """Take in the scalar volumes the user already loaded into Slicer's scene."""
    known = set(viewer.volume_ids())
    return [
        viewer.adopt_volume_node(node)
        for node in slicer.util.getNodesByClass("vtkMRMLScalarVolumeNode")
        if node.GetID() not in known
    ]
