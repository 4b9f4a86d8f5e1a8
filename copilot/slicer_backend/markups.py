"""Recorded evidence shown as Slicer markups: points as control points of one locked fiducial node named
"MedCopilot evidence", distances as locked line nodes. The viewer brings them up to date whenever its state
is read (after every call, under the session's lock), so they always equal the session's evidence list — a
rolled-back call included — plus, in a host, the points the agent's answers cite. The nodes stay in the
scene when the session ends: the radiologist sees them and saves them with the scene."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

POINTS_NODE_NAME = "MedCopilot evidence"
SESSION_ATTR = "MedCopilot.EvidenceSession"  # which session's evidence a markups node shows


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
    """Markups nodes in a scene kept equal to an evidence list (and, optionally, more items from `extra`)."""

    def __init__(
        self,
        scene: Any,
        evidence: list[dict[str, Any]],
        extra: Callable[[], list[dict[str, Any]]] | None = None,
        session_id: str = "",
    ) -> None:
        self.scene = scene
        self.evidence = evidence
        self.extra = extra
        self.session_id = session_id
        self.shown: list[tuple[Any, ...]] = []
        self.node_ids: list[str] = []
        self.points_id: str | None = None

    def nodes(self) -> list[Any]:
        """The markups nodes this list made that are still in the scene."""
        ids = [*([self.points_id] if self.points_id else []), *self.node_ids]
        return [n for n in (self.scene.GetNodeByID(i) for i in ids) if n is not None]

    def _remove(self, nid: str) -> None:
        node = self.scene.GetNodeByID(nid)
        if node is not None:
            for display in [node.GetNthDisplayNode(i) for i in range(node.GetNumberOfDisplayNodes())]:
                self.scene.RemoveNode(display)
            self.scene.RemoveNode(node)

    def _tag(self, node: Any) -> Any:
        node.SetLocked(1)  # the clinician cannot drag the agent's evidence away by accident
        node.SetAttribute(SESSION_ATTR, self.session_id or "1")
        return node

    def sync(self) -> None:
        """Bring the markups up to date when the evidence changed (the points node is updated in place)."""
        items = wanted([*self.evidence, *(self.extra() if self.extra is not None else [])])
        present = [*self.node_ids, *([self.points_id] if self.points_id else [])]
        if items == self.shown and all(self.scene.GetNodeByID(n) is not None for n in present):
            return
        for nid in self.node_ids:
            self._remove(nid)
        self.node_ids = []
        points = [w for w in items if w[0] == "point"]
        node = self.scene.GetNodeByID(self.points_id) if self.points_id else None
        if points and node is None:
            node = self._tag(_markups(self.scene, "vtkMRMLMarkupsFiducialNode", POINTS_NODE_NAME))
            self.points_id = node.GetID()
        if node is not None:
            modify = node.StartModify()
            node.RemoveAllControlPoints()
            for _, label, (ras,) in points:
                node.AddControlPoint(*ras, label)
            node.EndModify(modify)
        for _, label, (a, b) in (w for w in items if w[0] == "distance"):
            line = self._tag(_markups(self.scene, "vtkMRMLMarkupsLineNode", f"{POINTS_NODE_NAME}: {label}"))
            line.AddControlPoint(*a)
            line.AddControlPoint(*b)
            self.node_ids.append(line.GetID())
        self.shown = items
