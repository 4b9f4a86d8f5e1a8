"""The agent's slide evidence written into QuPath, and QuPath's own annotations read back (no identifiers).

Evidence becomes annotations of the open image's object hierarchy, built with QuPath's own classes:
`ROIs.createPointsROI(x, y, ImagePlane)` / `ROIs.createRectangleROI(x, y, w, h, ImagePlane)` (level-0 pixels,
the default plane), `PathObjects.createAnnotationObject(ROI, PathClass)`, classified
`PathClass.fromString("MedCopilot evidence", ColorTools.packRGB(r, g, b))`, named after the item and
locked; then `PathObjectHierarchy.addObjects(Collection)` (which fires the hierarchy-changed event) on the
JavaFX thread. All items are checked and built before anything is added; if QuPath refuses the addition,
whatever it had already added is removed again, so a failed write leaves the hierarchy as it was.
GeoJSON comes from `GsonTools.getInstance().toJson(pathObject)`, QuPath's own Feature form.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from copilot.errors import ViewerError
from qupath_ext.bridge import QuPathViewer, _java_call

EVIDENCE_CLASS = "MedCopilot evidence"
EVIDENCE_RGB = (0, 170, 255)
MAX_ITEMS = 200


@dataclass(frozen=True)
class SlideMark:
    """One item to write: a point (width = height = 0) or a rectangle, in level-0 pixels."""

    label: str
    x: float
    y: float
    width: float = 0.0
    height: float = 0.0

    @property
    def is_point(self) -> bool:
        return self.width == 0.0 and self.height == 0.0


def marks(evidence: list[dict[str, Any]]) -> list[SlideMark]:
    """The slide places of evidence items: answer points, recorded points, regions."""
    out = []
    for n, ev in enumerate(evidence):
        label = str(ev.get("label") or f"evidence {n + 1}")[:120]
        if ev.get("kind") == "wsi_region":
            out.append(SlideMark(label, float(ev["x"]), float(ev["y"]), float(ev["width"]), float(ev["height"])))
        elif isinstance(ev.get("point"), dict):
            out.append(SlideMark(label, float(ev["point"]["x"]), float(ev["point"]["y"])))
    return out


def check(items: list[SlideMark], size: tuple[int, int]) -> None:
    """Refuse the whole write unless every item is finite and inside the image."""
    if len(items) > MAX_ITEMS:
        raise ViewerError("invalid_arguments", f"at most {MAX_ITEMS} evidence items at a time")
    w, h = size
    for m in items:
        values = (m.x, m.y, m.width, m.height)
        if not all(math.isfinite(v) for v in values) or m.width < 0 or m.height < 0:
            raise ViewerError("invalid_arguments", f"{m.label}: coordinates must be finite and sizes non-negative")
        if not (0 <= m.x <= w and 0 <= m.y <= h and m.x + m.width <= w and m.y + m.height <= h):
            raise ViewerError("out_of_image", f"{m.label}: ({m.x:.0f}, {m.y:.0f}) lies outside the {w}×{h} image")


class EvidenceWriter:
    """Writes evidence into the hierarchy of the image open in a QuPath viewer."""

    def __init__(self, viewer: QuPathViewer) -> None:
        self.viewer = viewer
        self.jvm = viewer.jvm

    def _hierarchy(self) -> Any:
        return self.viewer.image_data().getHierarchy()

    @_java_call
    def write(self, items: list[SlideMark]) -> list[Any]:
        """Add the items as locked "MedCopilot evidence" annotations; returns QuPath's objects. Nothing is added
        when an item is invalid or QuPath refuses (`qupath_error`)."""
        if not items:
            return []
        check(items, self.viewer.require().info.dimensions)
        jvm = self.jvm
        plane = jvm.qupath.lib.regions.ImagePlane.getDefaultPlane()
        colour = jvm.qupath.lib.common.ColorTools.packRGB(*EVIDENCE_RGB)
        path_class = jvm.qupath.lib.objects.classes.PathClass.fromString(EVIDENCE_CLASS, colour)
        rois = jvm.qupath.lib.roi.ROIs
        objects = jvm.java.util.ArrayList()
        for m in items:
            roi = (
                rois.createPointsROI(float(m.x), float(m.y), plane)
                if m.is_point
                else rois.createRectangleROI(float(m.x), float(m.y), float(m.width), float(m.height), plane)
            )
            obj = jvm.qupath.lib.objects.PathObjects.createAnnotationObject(roi, path_class)
            obj.setName(m.label)
            obj.setLocked(True)
            objects.add(obj)
        hierarchy = self._hierarchy()
        added = self.viewer.on_fx(hierarchy, "addObjects", objects)  # None: it threw on the FX thread
        if added is None or not added:
            present = jvm.java.util.ArrayList()
            annotations = hierarchy.getAnnotationObjects()
            for obj in objects:
                if annotations.contains(obj):
                    present.add(obj)
            if present.size():
                self.viewer.on_fx(hierarchy, "removeObjects", present, True)
            raise ViewerError(
                "qupath_error",
                "QuPath refused to add the evidence annotations (its log says why); the image's objects are unchanged",
            )
        return [objects.get(i) for i in range(objects.size())]

    @_java_call
    def geojson(self, obj: Any) -> dict[str, Any]:
        """QuPath's own GeoJSON Feature of a path object."""
        return dict(json.loads(str(self.jvm.qupath.lib.io.GsonTools.getInstance().toJson(obj))))

    @_java_call
    def annotations(self) -> list[dict[str, Any]]:
        """The image's annotations for the model: class, shape, centroid and bounds in level-0 pixels, locked; the
        names and ids of the pathologist's own annotations are left out (they may identify), the copilot's kept."""
        out = []
        for n, obj in enumerate(self._hierarchy().getAnnotationObjects()):
            roi = obj.getROI()
            pc = obj.getPathClass()
            cls = str(pc.getName()) if pc is not None else None
            item: dict[str, Any] = {
                "index": n + 1,
                "class": cls,
                "shape": str(roi.getRoiName()),
                "centroid": [round(float(roi.getCentroidX()), 2), round(float(roi.getCentroidY()), 2)],
                "bounds": [round(float(v), 2) for v in (roi.getBoundsX(), roi.getBoundsY(), roi.getBoundsWidth(),
                                                        roi.getBoundsHeight())],
                "locked": bool(obj.isLocked()),
                "by_medcopilot": cls == EVIDENCE_CLASS,
            }  # fmt: skip
            if cls == EVIDENCE_CLASS and obj.getName() is not None:
                item["label"] = str(obj.getName())
            out.append(item)
        return out
