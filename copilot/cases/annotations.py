"""Pathology ground truth: QuPath-style GeoJSON annotations (level-0 pixels) and point-in-polygon tests.

QuPath exports each annotation as a GeoJSON Feature (with an `id`) whose `properties.classification` is
`{"name": ..., "color": [r, g, b]}` (derived classes: `"names": [...]`; before 0.4: `"colorRGB"`, a
packed ARGB integer), as QuPath's GsonTools.PathClassTypeAdapter writes and reads it (qupath/qupath,
qupath-core/src/main/java/qupath/lib/io/GsonTools.java). Geometries are Polygon or MultiPolygon
(exterior ring first, then holes, rings closed). Each polygon becomes one `Annotation`; the parts of a
MultiPolygon share their feature's `object_id`, and writing puts them back together. A point on an edge
counts as inside, as the scoring rules say.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class Annotation:
    """One polygon (exterior + holes, rings open) with its class name, class colour and source feature id."""

    cls: str
    exterior: np.ndarray
    holes: tuple[np.ndarray, ...] = ()
    colour: RGB | None = None
    object_id: str | None = None

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


def _classification(props: dict[str, Any]) -> tuple[str, RGB | None]:
    """Class name (derived classes joined with ": ", as QuPath names them) and colour of a feature."""
    cls = props.get("classification")
    if isinstance(cls, str):
        return cls, None
    if isinstance(cls, dict):
        names = cls.get("names") or ([cls["name"]] if cls.get("name") else [])
        colour: RGB | None = None
        if isinstance(cls.get("color"), list) and len(cls["color"]) >= 3:
            colour = (int(cls["color"][0]), int(cls["color"][1]), int(cls["color"][2]))
        elif isinstance(cls.get("colorRGB"), int):  # QuPath < 0.4: packed (A)RGB
            packed = cls["colorRGB"] & 0xFFFFFF
            colour = (packed >> 16, (packed >> 8) & 0xFF, packed & 0xFF)
        if names:
            return ": ".join(str(n) for n in names), colour
    return str(props.get("name") or props.get("class") or ""), None


def _open_ring(ring: Any) -> np.ndarray:
    arr = np.asarray(ring, dtype=float)[:, :2]
    return arr[:-1] if len(arr) > 1 and np.array_equal(arr[0], arr[-1]) else arr


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
    for n, feat in enumerate(features):
        geom = feat.get("geometry") or {}
        cls, colour = _classification(feat.get("properties") or {})
        polys = (
            [geom.get("coordinates", [])]
            if geom.get("type") == "Polygon"
            else (geom.get("coordinates", []) if geom.get("type") == "MultiPolygon" else [])
        )
        object_id = str(feat.get("id") or f"feature-{n}")
        for rings in polys:
            if not rings:
                continue
            arrays = [_open_ring(r) for r in rings]
            out.append(Annotation(cls, arrays[0], tuple(arrays[1:]), colour, object_id))
    return out


def read_geojson(path: str | Path) -> list[Annotation]:
    return parse_features(json.loads(Path(path).read_text(encoding="utf-8")))


def _closed(ring: np.ndarray) -> list[list[float]]:
    return [[float(x), float(y)] for x, y in np.vstack([ring, ring[:1]])]


def to_geojson(annotations: list[Annotation]) -> dict[str, Any]:
    """QuPath-style FeatureCollection: one feature per object (consecutive parts with one `object_id` make a
    MultiPolygon), classification with name (or names) and colour."""
    groups: list[list[Annotation]] = []
    for a in annotations:
        if groups and a.object_id is not None and groups[-1][0].object_id == a.object_id:
            groups[-1].append(a)
        else:
            groups.append([a])
    feats = []
    for n, parts in enumerate(groups):
        first = parts[0]
        polygons = [[_closed(r) for r in (a.exterior, *a.holes)] for a in parts]
        geometry = (
            {"type": "Polygon", "coordinates": polygons[0]}
            if len(polygons) == 1
            else {"type": "MultiPolygon", "coordinates": polygons}
        )
        names = first.cls.split(": ")
        classification: dict[str, Any] = {"name": first.cls} if len(names) == 1 else {"names": names}
        if first.colour is not None:
            classification["color"] = list(first.colour)
        feats.append(
            {
                "type": "Feature",
                "id": first.object_id or f"annotation-{n}",
                "geometry": geometry,
                "properties": {"objectType": "annotation", "classification": classification},
            }
        )
    return {"type": "FeatureCollection", "features": feats}
