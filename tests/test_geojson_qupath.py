"""QuPath GeoJSON read as QuPath means it: only annotations are ground truth, every geometry type read or
reported, QuPath's properties kept on a round trip, unclassified objects written without a classification."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np

from copilot.cases.annotations import object_type, parse_geojson, read_geojson, to_geojson

SQUARE = [[0, 0], [100, 0], [100, 100], [0, 100], [0, 0]]
HOLE = [[40, 40], [60, 40], [60, 60], [40, 60], [40, 40]]


def _feature(fid: str, geometry: dict, **props: object) -> dict:
    return {"type": "Feature", "id": fid, "geometry": geometry, "properties": dict(props)}


def _shift(ring: list[list[int]], d: int) -> list[list[int]]:
    return [[x + d, y + d] for x, y in ring]


EXPORT = {  # "Export objects as GeoJSON" from QuPath 0.4+: annotations with detections and cells
    "type": "FeatureCollection",
    "features": [
        _feature(
            "a1", {"type": "Polygon", "coordinates": [SQUARE, HOLE]}, objectType="annotation", name="Tumour core",
            classification={"name": "Tumor", "color": [200, 0, 0]}, isLocked=True,
            measurements={"Area µm^2": 9600.0, "Num Detections": 2}, metadata={"reviewer": "A"},
        ),
        _feature("a2", {"type": "Polygon", "coordinates": [_shift(SQUARE, 500)]}, objectType="annotation",
                 color=[0, 255, 0]),  # unclassified, own colour
        _feature(
            "a3",
            {
                "type": "MultiPolygon",
                "coordinates": [[_shift(SQUARE, 1000)], [_shift(SQUARE, 1200), _shift(HOLE, 1200)]],
            },
            objectType="annotation", classification={"names": ["Tumor", "Positive"], "color": [255, 128, 0]},
        ),
        _feature("p1", {"type": "MultiPoint", "coordinates": [[10, 10], [20, 20]]}, objectType="annotation",
                 classification={"name": "Mitosis", "color": [0, 0, 255]}),
        _feature("d1", {"type": "Polygon", "coordinates": [_shift(SQUARE, 2000)]}, objectType="detection",
                 classification={"name": "Tumor", "color": [200, 0, 0]}),
        {
            **_feature("c1", {"type": "Polygon", "coordinates": [_shift(SQUARE, 3000)]}, objectType="cell",
                       classification={"name": "Tumor", "color": [200, 0, 0]}, measurements={"Nucleus: Area": 30.5}),
            "nucleusGeometry": {"type": "Polygon", "coordinates": [_shift(HOLE, 3000)]},
        },
        _feature("t1", {"type": "Polygon", "coordinates": [_shift(SQUARE, 4000)]}, objectType="tile"),
        _feature("m1", {"type": "Polygon", "coordinates": [_shift(SQUARE, 5000)]}, objectType="tmaCore",
                 isMissing=False, name="A-1"),
        _feature("l1", {"type": "LineString", "coordinates": [[0, 0], [50, 50]]}, objectType="annotation"),
        _feature("PathDetectionObject", {"type": "Polygon", "coordinates": [_shift(SQUARE, 6000)]}),  # v0.2
    ],
}  # fmt: skip


def test_only_annotations_are_ground_truth_and_the_rest_is_reported() -> None:
    anns, report = parse_geojson(EXPORT)
    assert sorted({a.object_id for a in anns}) == ["a1", "a2", "a3"]
    skipped = {s["id"]: s["reason"] for s in report.skipped}
    assert set(skipped) == {"p1", "d1", "c1", "t1", "m1", "l1", "PathDetectionObject"}
    assert "MultiPoint" in skipped["p1"] and "LineString" in skipped["l1"]
    assert "detection" in skipped["d1"] and "cell" in skipped["c1"] and "tmaCore" in skipped["m1"]
    assert "detection" in skipped["PathDetectionObject"]
    assert report.summary()["features"] == 10 and report.regions == 3
    assert not any(a.contains(2050, 2050) or a.contains(3050, 3050) for a in anns)  # no cell is a target


def test_a_case_may_name_more_object_types() -> None:
    anns, _ = parse_geojson(EXPORT, object_types=("annotation", "detection", "cell"))
    assert {"d1", "c1", "PathDetectionObject"} <= {a.object_id for a in anns}
    assert object_type({"properties": {"object_type": "tma_core"}}) == "tmaCore"
    assert object_type({"properties": {}}) == "annotation"  # QuPath's default


def test_qupath_export_round_trips_with_its_properties(tmp_path: Path) -> None:
    anns, _ = parse_geojson(EXPORT)
    tumour = anns[0]
    assert (tumour.cls, tumour.colour, tumour.name, tumour.locked) == ("Tumor", (200, 0, 0), "Tumour core", True)
    assert tumour.measurements == {"Area µm^2": 9600.0, "Num Detections": 2} and len(tumour.holes) == 1
    unclassified = anns[1]
    assert unclassified.cls == "" and not unclassified.locked
    written = to_geojson(anns)
    expected = copy.deepcopy([f for f in EXPORT["features"] if f["id"] in ("a1", "a2", "a3")])
    assert written["features"] == expected  # QuPath's own form, property for property
    assert "classification" not in written["features"][1]["properties"]  # unclassified, as QuPath writes it
    path = tmp_path / "round.geojson"
    path.write_text(json.dumps(written), encoding="utf-8")
    again = read_geojson(path)
    assert [(a.cls, a.colour, a.object_id, a.name, a.locked, a.measurements) for a in again] == [
        (a.cls, a.colour, a.object_id, a.name, a.locked, a.measurements) for a in anns
    ]
    for a, b in zip(anns, again, strict=True):
        assert np.array_equal(a.exterior, b.exterior) and all(map(np.array_equal, a.holes, b.holes))
    assert again[0].contains(10, 10) and not again[0].contains(50, 50)


def test_legacy_measurement_list_is_read() -> None:
    feature = _feature("x", {"type": "Polygon", "coordinates": [SQUARE]}, objectType="annotation",
                       measurements=[{"name": "Area", "value": 1.5}])  # fmt: skip
    assert parse_geojson(feature)[0][0].measurements == {"Area": 1.5}
