"""QuPath GeoJSON read as QuPath means it: only annotations are ground truth, every geometry type read or
reported, QuPath's properties kept on a round trip, unclassified objects written without a classification."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from copilot.cases.annotations import Annotation, object_type, parse_geojson, read_geojson, to_geojson
from copilot.cases.qupath_classes import class_colour

A1, A2, A3 = (f"0b6d5c9e-41f2-4a8e-9c3d-7e21f0a4b5c{n}" for n in (1, 2, 3))  # QuPath writes UUID ids
SQUARE = [[0, 0], [100, 0], [100, 100], [0, 100], [0, 0]]
HOLE = [[40, 40], [60, 40], [60, 60], [40, 60], [40, 40]]


def _feature(fid: str, geometry: dict, **props: object) -> dict:
    return {"type": "Feature", "id": fid, "geometry": geometry, "properties": dict(props)}


def _shift(ring: list[list[int]], d: int) -> list[list[int]]:
    return [[x + d, y + d] for x, y in ring]


EXPORT: dict[str, Any] = {  # "Export objects as GeoJSON" from QuPath 0.4+: annotations with detections and cells
    "type": "FeatureCollection",
    "features": [
        _feature(
            A1, {"type": "Polygon", "coordinates": [SQUARE, HOLE]}, objectType="annotation", name="Tumour core",
            classification={"name": "Tumor", "color": [200, 0, 0]}, isLocked=True,
            measurements={"Area µm^2": 9600.0, "Num Detections": 2}, metadata={"reviewer": "A"},
        ),
        _feature(A2, {"type": "Polygon", "coordinates": [_shift(SQUARE, 500)]}, objectType="annotation",
                 color=[0, 255, 0]),  # unclassified, own colour
        _feature(
            A3,
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
    assert sorted({str(a.object_id) for a in anns}) == [A1, A2, A3]
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
    expected = copy.deepcopy([f for f in EXPORT["features"] if f["id"] in (A1, A2, A3)])
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


def test_written_classes_carry_qupaths_colour_and_ids_are_uuids() -> None:
    """A class without a colour of its own is written with the one QuPath gives it (checked against a JVM:
    java.util.Random(("Lymphocyte").hashCode()) draws 196, 65, 127), and every feature id is a UUID."""
    square = np.array(SQUARE[:4], dtype=float)
    anns = [Annotation("Tumor", square), Annotation("Lymphocyte", square + 10),
            Annotation("Stroma: Positive", square + 20, object_id="gland-7"),
            Annotation("Tumor: Positive", square + 30, object_id=A1)]  # fmt: skip
    feats = to_geojson(anns)["features"]
    assert [f["properties"]["classification"] for f in feats] == [
        {"name": "Tumor", "color": [200, 0, 0]},  # QuPath's standard class
        {"name": "Lymphocyte", "color": [196, 65, 127]},  # a new class: QuPath's seeded draw
        {"names": ["Stroma", "Positive"], "color": [112, 150, 112]},  # Stroma's colour × 0.75
        {"names": ["Tumor", "Positive"], "color": [200, 50, 50]},  # Tumor's own intensity colour
    ]
    ids = [f["id"] for f in feats]
    assert all(str(uuid.UUID(i)) == i for i in ids) and len(set(ids)) == 4 and ids[3] == A1
    assert to_geojson(anns)["features"][2]["id"] == ids[2]  # a non-UUID id maps to the same UUID every time
    assert class_colour(["Positive"]) == (250, 62, 62)  # (200, 50, 50) brightened by 1.25


def test_legacy_measurement_list_is_read() -> None:
    feature = _feature("x", {"type": "Polygon", "coordinates": [SQUARE]}, objectType="annotation",
                       measurements=[{"name": "Area", "value": 1.5}])  # fmt: skip
    assert parse_geojson(feature)[0][0].measurements == {"Area": 1.5}


def test_bracs_adapter_reports_what_is_not_ground_truth(tmp_path: Path) -> None:
    """A BRACS GeoJSON export holding detections and a point: only the annotation becomes a region; the adapter's
    report names what was left out and why."""
    from copilot.adapters.bracs import adapt_bracs
    from copilot.cases.slides import write_pyramid

    img = np.full((512, 768, 3), 235, np.uint8)
    write_pyramid(tmp_path / "BRACS_WSI" / "train" / "Group_MT" / "Type_DCIS" / "BRACS_1.svs", img, 0.25, (1, 4))
    folder = tmp_path / "BRACS_WSI_Annotations" / "train" / "Group_MT" / "Type_DCIS"
    folder.mkdir(parents=True)
    feats = [
        _feature("a", {"type": "Polygon", "coordinates": [SQUARE]}, objectType="annotation",
                 classification={"name": "DCIS-sure"}),
        _feature("d", {"type": "Polygon", "coordinates": [_shift(SQUARE, 200)]}, objectType="detection",
                 classification={"name": "DCIS-sure"}),
        _feature("p", {"type": "MultiPoint", "coordinates": [[5, 5]]}, classification={"name": "DCIS-sure"}),
    ]  # fmt: skip
    (folder / "BRACS_1.geojson").write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    report = adapt_bracs(tmp_path / "BRACS_WSI", tmp_path / "packs")
    truth = read_geojson(tmp_path / "packs" / "BRACS_1" / "hidden" / "annotations.geojson")
    assert len(truth) == 1 and truth[0].contains(50, 50) and not truth[0].contains(250, 250)
    (note,) = [n for n in report.notes if "BRACS_1" in n]
    assert "2 GeoJSON object(s)" in note and "detection" in note and "MultiPoint" in note
