"""Pathology ground truth: QuPath-style GeoJSON annotations (level-0 pixels) and point-in-polygon tests.

QuPath exports each annotation as a GeoJSON Feature whose `properties.classification.name` is its
class; geometries are Polygon or MultiPolygon (exterior ring first, then holes). A point on an
edge counts as inside, as the scoring rules say.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Annotation:
    """One polygon (exterior + holes) with its class name."""

    cls: str
    exterior: np.ndarray
    holes: tuple[np.ndarray, ...] = ()

    def contains(self, x: float, y: float) -> bool:
        if not _in_ring(self.exterior, x, y, edge=True):
            return False
        return not any(_in_ring(h, x, y, edge=False) for h in self.holes)

    def area(self) -> float:
        return _ring_area(self.exterior) - sum(_ring_area(h) for h in self.holes)


def _ring_area(ring: np.ndarray) -> float:
    x, y = ring[:, 0], ring[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2.0)


def _on_segment(ax: float, ay: float, bx: float, by: float, x: float, y: float) -> bool:
    cross = (bx - ax) * (y - ay) - (by - ay) * (x - ax)
    if abs(cross) > 1e-9 * max(1.0, abs(bx - ax) + abs(by - ay)):
        return False
    return min(ax, bx) - 1e-9 <= x <= max(ax, bx) + 1e-9 and min(ay, by) - 1e-9 <= y <= max(ay, by) + 1e-9


def _in_ring(ring: np.ndarray, x: float, y: float, edge: bool) -> bool:
    """Even-odd ray casting; points on an edge count as `edge`."""
    inside = False
    n = len(ring)
    for i in range(n):
        ax, ay = ring[i]
        bx, by = ring[(i + 1) % n]
        if _on_segment(ax, ay, bx, by, x, y):
            return edge
        if (ay > y) != (by > y):
            xc = ax + (y - ay) * (bx - ax) / (by - ay)
            if x < xc:
                inside = not inside
    return inside


def _class_name(props: dict[str, Any]) -> str:
    cls = props.get("classification") or {}
    if isinstance(cls, dict) and cls.get("name"):
        return str(cls["name"])
    return str(props.get("name") or props.get("class") or "")


def parse_features(data: Any) -> list[Annotation]:
    """Annotations from a FeatureCollection, a list of Features or a single Feature."""
    if isinstance(data, dict) and data.get("type") == "FeatureCollection":
        features = data.get("features", [])
    elif isinstance(data, list):
        features = data
    elif isinstance(data, dict) and data.get("type") == "Feature":
        features = [data]
    else:
        raise ValueError("not GeoJSON features")
    out: list[Annotation] = []
    for feat in features:
        geom = feat.get("geometry") or {}
        cls = _class_name(feat.get("properties") or {})
        polys = (
            [geom.get("coordinates", [])]
            if geom.get("type") == "Polygon"
            else (geom.get("coordinates", []) if geom.get("type") == "MultiPolygon" else [])
        )
        for rings in polys:
            if not rings:
                continue
            arrays = [np.asarray(r, dtype=float)[:, :2] for r in rings]
            out.append(Annotation(cls, arrays[0], tuple(arrays[1:])))
    return out


def read_geojson(path: str | Path) -> list[Annotation]:
    return parse_features(json.loads(Path(path).read_text(encoding="utf-8")))


def to_geojson(annotations: list[Annotation]) -> dict[str, Any]:
    """QuPath-style FeatureCollection of annotations."""
    feats = []
    for a in annotations:
        rings = [a.exterior, *a.holes]
        coords = [[[float(x), float(y)] for x, y in np.vstack([r, r[:1]])] for r in rings]
        feats.append(
            {
                "type": "Feature",
                "geometry": {"type": "Polygon", "coordinates": coords},
                "properties": {"objectType": "annotation", "classification": {"name": a.cls}},
            }
        )
    return {"type": "FeatureCollection", "features": feats}
