"""Pathology ground truth: QuPath-style GeoJSON annotations (level-0 pixels) and point-in-polygon tests.

QuPath exports each annotation as a GeoJSON Feature (with an `id`) whose `properties.classification` is
`{"name": ..., "color": [r, g, b]}` (derived classes: `"names": [...]`; before 0.4: `"colorRGB"`, a
packed ARGB integer), as QuPath's GsonTools.PathClassTypeAdapter writes and reads it (qupath/qupath,
qupath-core/src/main/java/qupath/lib/io/GsonTools.java). Geometries are Polygon or MultiPolygon
(exterior ring first, then holes, rings closed). Each polygon becomes one `Annotation`; the parts of a
MultiPolygon share their feature's `object_id`, and writing puts them back together. A point on an edge
counts as inside, as the scoring rules say.

The object type is read as QuPath's PathObjectTypeAdapters reads it (qupath-core/src/main/java/qupath/
lib/io/PathObjectTypeAdapters.java): `properties.objectType` ("annotation", "detection", "cell", "tile",
"tmaCore"), else the older `object_type` or `type` property, else a v0.2 type name in the feature `id`
(PathAnnotationObject …); without any, a feature is an annotation. Only annotations are ground-truth
regions unless the caller names more types (`object_types`); detections, cells, tiles and TMA cores are
skipped. Points, lines and empty geometries are not regions and are skipped too; `parse_geojson` returns
a report naming each skipped feature and why. The other properties QuPath writes (`name`, `color`,
`isLocked` — written only when true —, `measurements`, `metadata`) are kept verbatim and written back; an
unclassified object is written without `classification`, as QuPath writes it. A class is always written with
its `color` (its own, else the one QuPath would give it) and each feature `id` is a UUID
(`copilot.cases.qupath_classes`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from copilot.cases.qupath_classes import class_colour, feature_id

RGB = tuple[int, int, int]
REGION_TYPES = ("annotation",)
_TYPE_NAMES = {  # QuPath's object types and their v0.2 class names (PathObjectTypeAdapters)
    "annotation": "annotation", "pathannotationobject": "annotation", "unknown": "annotation",
    "detection": "detection", "pathdetectionobject": "detection",
    "cell": "cell", "pathcellobject": "cell",
    "tile": "tile", "pathtileobject": "tile",
    "tmacore": "tmaCore", "tma_core": "tmaCore", "tmacoreobject": "tmaCore",
    "root": "root", "pathrootobject": "root",
}  # fmt: skip
_TYPE_KEYS = ("objectType", "object_type", "type")


@dataclass(frozen=True)
class Annotation:
    """One polygon (exterior + holes, rings open) with its class name, class colour and source feature id."""

    cls: str
    exterior: np.ndarray
    holes: tuple[np.ndarray, ...] = ()
    colour: RGB | None = None
    object_id: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)  # the other QuPath properties, verbatim

    @property
    def name(self) -> str | None:
        """The object's own name in QuPath (not its class)."""
        value = self.properties.get("name")
        return None if value is None else str(value)

    @property
    def locked(self) -> bool:
        return self.properties.get("isLocked") is True

    @property
    def measurements(self) -> dict[str, Any]:
        """QuPath's measurement map (the pre-0.4 list of {name, value} read as a map)."""
        m = self.properties.get("measurements")
        if isinstance(m, list):
            return {str(e.get("name")): e.get("value") for e in m if isinstance(e, dict)}
        return dict(m) if isinstance(m, dict) else {}

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
    return str(props.get("class") or ""), None  # `name` is the object's own name in QuPath, never its class


def _open_ring(ring: Any) -> np.ndarray:
    arr = np.asarray(ring, dtype=float)[:, :2]
    return arr[:-1] if len(arr) > 1 and np.array_equal(arr[0], arr[-1]) else arr


@dataclass
class GeoJSONReport:
    """What a reader took as regions and what it skipped, feature by feature, with the reason."""

    regions: int = 0
    features: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)

    def skip(self, feature_id: str, reason: str) -> None:
        self.skipped.append({"id": feature_id, "reason": reason})

    def summary(self) -> dict[str, Any]:
        return {"features": self.features, "regions": self.regions, "skipped": list(self.skipped)}


def object_type(feature: dict[str, Any]) -> str:
    """A feature's QuPath object type, read as QuPath reads it (annotation when none is given)."""
    props = feature.get("properties") or {}
    raw = next((props[k] for k in _TYPE_KEYS if isinstance(props.get(k), str)), None)
    if raw is None and str(feature.get("id", "")).lower() in _TYPE_NAMES:
        raw = str(feature["id"])
    if raw is None:
        return "annotation"
    return _TYPE_NAMES.get(raw.lower(), raw)


def _features(data: Any) -> list[Any]:
    if isinstance(data, dict) and data.get("type") == "FeatureCollection":
        return list(data.get("features", []))
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and data.get("type") == "Feature":
        return [data]
    raise ValueError("not GeoJSON features")


def _polygons(geom: Any, fid: str, report: GeoJSONReport) -> list[Any]:
    """The polygons of a geometry (GeometryCollection members too); anything else is reported."""
    kind = geom.get("type") if isinstance(geom, dict) else None
    if kind == "Polygon":
        return [geom.get("coordinates") or []]
    if kind == "MultiPolygon":
        return list(geom.get("coordinates") or [])
    if kind == "GeometryCollection":
        return [p for g in geom.get("geometries") or [] for p in _polygons(g, fid, report)]
    report.skip(fid, f"geometry {kind or 'missing'} is not an area (points and lines are not regions)")
    return []


def parse_geojson(
    data: Any, object_types: tuple[str, ...] = REGION_TYPES
) -> tuple[list[Annotation], GeoJSONReport]:
    """Region annotations from a FeatureCollection, a list of Features or a single Feature, and a report of
    every feature skipped (object type not a region type, not an area, empty)."""
    report = GeoJSONReport()
    out: list[Annotation] = []
    for n, feat in enumerate(_features(data)):
        report.features += 1
        object_id = str(feat.get("id") or f"feature-{n}") if isinstance(feat, dict) else f"feature-{n}"
        if not isinstance(feat, dict):
            report.skip(object_id, "not a GeoJSON Feature")
            continue
        kind = object_type(feat)
        if kind not in object_types:
            report.skip(object_id, f"objectType {kind} is not ground truth here (regions: {', '.join(object_types)})")
            continue
        props = feat.get("properties") or {}
        cls, colour = _classification(props)
        kept = {k: v for k, v in props.items() if k not in ("classification", *_TYPE_KEYS)}
        found = 0
        for rings in _polygons(feat.get("geometry"), object_id, report):
            arrays = [_open_ring(r) for r in rings if len(r) > 0]
            if not arrays or len(arrays[0]) < 3:
                continue
            out.append(Annotation(cls, arrays[0], tuple(arrays[1:]), colour, object_id, kept))
            found += 1
        if found:
            report.regions += 1
        elif not any(s["id"] == object_id for s in report.skipped):
            report.skip(object_id, "geometry without an area (fewer than three points)")
    return out, report


def parse_features(data: Any, object_types: tuple[str, ...] = REGION_TYPES) -> list[Annotation]:
    """Region annotations from a FeatureCollection, a list of Features or a single Feature."""
    return parse_geojson(data, object_types)[0]


def read_geojson(path: str | Path, object_types: tuple[str, ...] = REGION_TYPES) -> list[Annotation]:
    """Region annotations of a GeoJSON file (only QuPath annotations unless `object_types` says more)."""
    return parse_features(json.loads(Path(path).read_text(encoding="utf-8")), object_types)


def _closed(ring: np.ndarray) -> list[list[float]]:
    return [[float(x), float(y)] for x, y in np.vstack([ring, ring[:1]])]


def to_geojson(annotations: list[Annotation]) -> dict[str, Any]:
    """QuPath-style FeatureCollection: one feature per object (consecutive parts with one `object_id` make a
    MultiPolygon) with a UUID id, classification with name (or names) and colour."""
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
        properties: dict[str, Any] = {"objectType": "annotation", **first.properties}
        if first.cls:  # QuPath writes no classification for an unclassified object
            names = first.cls.split(": ")
            classification: dict[str, Any] = {"name": first.cls} if len(names) == 1 else {"names": names}
            classification["color"] = list(first.colour or class_colour(names))  # QuPath always writes one
            properties["classification"] = classification
        feats.append(
            {
                "type": "Feature",
                "id": feature_id(first.object_id, f"{n}:{json.dumps(geometry)}"),
                "geometry": geometry,
                "properties": properties,
            }
        )
    return {"type": "FeatureCollection", "features": feats}
