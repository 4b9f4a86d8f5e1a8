"""Recorded evidence shown as Slicer markups: points as control points of one fiducial node, distances as
line nodes. The viewer brings them up to date whenever its state is read (after every call, under the
session's lock), so they always equal the session's evidence list — a rolled-back call included."""

from __future__ import annotations

from typing import Any

POINTS_NODE_NAME = "MedCopilot evidence"


def _markups(scene: Any, cls: str, name: str) -> Any:
    """A new markups node of a class, registering the class first on a bare slicer-core scene."""
    node = scene.AddNewNodeByClass(cls, name)
    if node is None:
        from copilot.slicer_backend.mrml import mrml

        scene.RegisterNodeClass(getattr(mrml(), cls)())
        node = scene.AddNewNodeByClass(cls, name)
    node.CreateDefaultDisplayNodes()
    return node


def wanted(evidence: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(kind, label, points) of the evidence items that have positions."""
    out: list[tuple[Any, ...]] = []
    for ev in evidence:
        label = ev.get("label") or f"E{ev.get('evidence_id')}"
        if ev.get("kind") == "point":
            out.append(("point", label, (tuple(ev["ras"]),)))
        elif ev.get("kind") == "distance":
            out.append(("distance", label, (tuple(ev["a"]["ras"]), tuple(ev["b"]["ras"]))))
    return out


class EvidenceMarkups:
    """Markups nodes in a scene kept equal to an evidence list."""

    def __init__(self, scene: Any, evidence: list[dict[str, Any]]) -> None:
        self.scene = scene
        self.evidence = evidence
        self.shown: list[tuple[Any, ...]] = []
        self.node_ids: list[str] = []

    def sync(self) -> None:
        """Rebuild the markups when the evidence changed."""
        items = wanted(self.evidence)
        if items == self.shown and all(self.scene.GetNodeByID(n) is not None for n in self.node_ids):
            return
        for nid in self.node_ids:
            node = self.scene.GetNodeByID(nid)
            if node is not None:
                for display in [node.GetNthDisplayNode(i) for i in range(node.GetNumberOfDisplayNodes())]:
                    self.scene.RemoveNode(display)
                self.scene.RemoveNode(node)
        self.node_ids = []
        points = [w for w in items if w[0] == "point"]
        if points:
            node = _markups(self.scene, "vtkMRMLMarkupsFiducialNode", POINTS_NODE_NAME)
            for _, label, (ras,) in points:
                node.AddControlPoint(*ras, label)
            self.node_ids.append(node.GetID())
        for _, label, (a, b) in (w for w in items if w[0] == "distance"):
            line = _markups(self.scene, "vtkMRMLMarkupsLineNode", label)
            line.AddControlPoint(*a)
            line.AddControlPoint(*b)
            self.node_ids.append(line.GetID())
        self.shown = items
