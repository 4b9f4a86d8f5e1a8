"""Recorded evidence shown as Slicer markups: points as control points of one fiducial node, distances as
line nodes, kept equal to the session's evidence list after every call (refused calls included, so a
rolled-back call leaves the markups as they were)."""

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


class EvidenceMarkups:
    """Keeps markups nodes in the session viewer's scene equal to the session's evidence."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.shown: list[tuple[Any, ...]] = []
        self.node_ids: list[str] = []
        session.listeners.append(self.sync)

    @staticmethod
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

    def sync(self, outcome: Any = None, args: Any = None, actor: str = "") -> None:
        """Rebuild the markups when the evidence changed."""
        with self.session.lock:
            wanted = self.wanted(self.session.evidence)
            if wanted == self.shown:
                return
            scene = self.session.viewer.scene
            for nid in self.node_ids:
                node = scene.GetNodeByID(nid)
                if node is not None:
                    for i in range(node.GetNumberOfDisplayNodes()):
                        scene.RemoveNode(node.GetNthDisplayNode(i))
                    scene.RemoveNode(node)
            self.node_ids = []
            points = [w for w in wanted if w[0] == "point"]
            if points:
                node = _markups(scene, "vtkMRMLMarkupsFiducialNode", POINTS_NODE_NAME)
                for _, label, (ras,) in points:
                    node.AddControlPoint(*ras, label)
                self.node_ids.append(node.GetID())
            for _, label, (a, b) in (w for w in wanted if w[0] == "distance"):
                line = _markups(scene, "vtkMRMLMarkupsLineNode", label)
                line.AddControlPoint(*a)
                line.AddControlPoint(*b)
                self.node_ids.append(line.GetID())
            self.shown = wanted
