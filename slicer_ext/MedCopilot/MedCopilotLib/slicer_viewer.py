"""`SlicerViewer`: the radiology viewer protocol over 3D Slicer's scene.

It keeps the engine's viewer state (the geometry the handlers and the images are computed from) and
mirrors every change into Slicer's nodes after each operation: volume nodes, slice nodes (SliceToRAS
and field of view), slice composite nodes (background/foreground/opacity), scalar volume display
nodes (window/level, colour node), the layout, and markups/transforms/label maps for derived objects.
Renders are computed from the volume nodes' voxels and IJK→RAS matrices with the engine's renderer, so
they work with `--no-main-window` (no layout manager, no views to capture) and the point↔RAS maths is
exactly the one used to draw each image; Slicer's own views show the same planes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import slicer
import vtk

from copilot.engine.derived import Segment, TransformNode
from copilot.engine.viewer import EmbeddedVolumeViewer
from copilot.engine.volume import Volume
from MedCopilotLib.mapping import COLOR_NODE_IDS, FUSION_COMPOSITING, LAYOUT_IDS, SLICE_NODE_NAMES


def _matrix(m: np.ndarray) -> vtk.vtkMatrix4x4:
    out = vtk.vtkMatrix4x4()
    for r in range(4):
        for c in range(4):
            out.SetElement(r, c, float(m[r, c]))
    return out


def volume_from_node(node: Any) -> Volume:
    """A read-only engine view of a scalar volume node: voxels and IJK→RAS (parent transforms ignored)."""
    m = vtk.vtkMatrix4x4()
    node.GetIJKToRASMatrix(m)
    ijk_to_ras = np.array([[m.GetElement(r, c) for c in range(4)] for r in range(4)])
    data = np.array(slicer.util.arrayFromVolume(node), dtype=np.float32)  # [k, j, i], copied
    return Volume(name=node.GetName(), data=data, ijk_to_ras=ijk_to_ras, source=node.GetID())


class SlicerViewer(EmbeddedVolumeViewer):
    """Embedded-engine state + a mirror into Slicer's MRML scene."""

    kind = "radiology"

    def __init__(self) -> None:
        super().__init__()
        self._nodes: dict[str, Any] = {}

    # ----- scene -----
    def add_volume(self, volume: Volume) -> str:
        node = slicer.mrmlScene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", volume.name)
        slicer.util.updateVolumeFromArray(node, volume.data)
        node.SetIJKToRASMatrix(_matrix(volume.ijk_to_ras))
        node.CreateDefaultDisplayNodes()
        vid = node.GetID()
        self._s.volumes[vid] = volume
        from copilot.engine.display import default_display

        self._s.display[vid] = default_display(volume)
        self._nodes[vid] = node
        return vid

    def adopt_loaded_volumes(self) -> list[str]:
        """Take in the scalar volumes already in Slicer's scene (e.g. loaded by the user)."""
        ids = []
        for node in slicer.util.getNodesByClass("vtkMRMLScalarVolumeNode"):
            if node.GetID() not in self._s.volumes:
                from copilot.engine.display import default_display

                vol = volume_from_node(node)
                self._s.volumes[node.GetID()] = vol
                self._s.display[node.GetID()] = default_display(vol)
                self._nodes[node.GetID()] = node
                ids.append(node.GetID())
        return ids

    def clear(self) -> None:
        for node in self._nodes.values():
            slicer.mrmlScene.RemoveNode(node)
        self._nodes.clear()
        super().clear()

    def add_segment(self, segment: Segment) -> str:
        sid = super().add_segment(segment)
        node = slicer.mrmlScene.AddNewNodeByClass("vtkMRMLLabelMapVolumeNode", segment.name)
        slicer.util.updateVolumeFromArray(node, (segment.mask.data > 0).astype(np.uint8))
        node.SetIJKToRASMatrix(_matrix(segment.mask.ijk_to_ras))
        self._nodes[sid] = node
        return sid

    def add_transform(self, node: TransformNode) -> str:
        tid = super().add_transform(node)
        mrml = slicer.mrmlScene.AddNewNodeByClass("vtkMRMLLinearTransformNode", node.name)
        mrml.SetMatrixTransformToParent(_matrix(np.linalg.inv(node.matrix)))  # moving → fixed, as Slicer resamples
        self._nodes[tid] = mrml
        return tid

    # ----- mirror -----
    def state(self) -> dict[str, Any]:
        """The snapshot the session takes after every call; taking it also mirrors the state into Slicer."""
        self.sync()
        return super().state()

    def restore_state(self, state: Any) -> None:
        super().restore_state(state)
        self.sync()

    def sync(self) -> None:
        """Push the current state into Slicer's slice, composite and display nodes and the layout."""
        s = self._s
        for name, view in s.views.items():
            node = slicer.mrmlScene.GetNodeByID(f"vtkMRMLSliceNode{SLICE_NODE_NAMES[name]}")
            if node is None:
                continue
            node.GetSliceToRAS().DeepCopy(_matrix(view.slice_to_ras()))
            node.SetFieldOfView(view.fov[0], view.fov[1], node.GetFieldOfView()[2])
            node.UpdateMatrices()
            comp = slicer.mrmlScene.GetNodeByID(f"vtkMRMLSliceCompositeNode{SLICE_NODE_NAMES[name]}")
            if comp is not None:
                comp.SetBackgroundVolumeID(s.background)
                comp.SetForegroundVolumeID(s.foreground)
                comp.SetForegroundOpacity(s.opacity)
                comp.SetCompositing(FUSION_COMPOSITING[s.fusion_mode])
        for vid, d in s.display.items():
            node = self._nodes.get(vid)
            display = node.GetDisplayNode() if node is not None else None
            if display is not None:
                display.SetAutoWindowLevel(0)
                display.SetWindowLevel(d.window, d.level)
                display.SetAndObserveColorNodeID(COLOR_NODE_IDS[d.colormap])
        manager = slicer.app.layoutManager()
        if manager is not None:  # None with --no-main-window
            manager.setLayout(LAYOUT_IDS[s.layout])


def evidence_as_markups(session: Any) -> None:
    """Show recorded evidence in Slicer: points as control points of a fiducial node, distances as lines."""
    state: dict[str, Any] = {}

    def on_call(outcome: Any, args: Any, actor: str) -> None:
        ev = outcome.result.get("evidence") if outcome.ok else None
        if not ev:
            return
        if ev.get("kind") == "point":
            node = state.get("points")
            if node is None or slicer.mrmlScene.GetNodeByID(node.GetID()) is None:
                node = state["points"] = slicer.mrmlScene.AddNewNodeByClass(
                    "vtkMRMLMarkupsFiducialNode", "MedCopilot evidence"
                )
            node.AddControlPoint(*ev["ras"], ev.get("label") or f"E{ev['evidence_id']}")
        elif ev.get("kind") == "distance":
            line = slicer.mrmlScene.AddNewNodeByClass("vtkMRMLMarkupsLineNode", ev.get("label") or "distance")
            line.AddControlPoint(*ev["a"]["ras"])
            line.AddControlPoint(*ev["b"]["ras"])

    session.listeners.append(on_call)
