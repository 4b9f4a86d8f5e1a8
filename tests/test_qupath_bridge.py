"""The QuPath bridge: argument mapping and coordinate maths against a QuPath API test double backed by the
embedded viewer; live tests (marked `qupath`) against a running QuPath's Py4J gateway when there is one."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from copilot.cases.annotations import Annotation, parse_features, read_geojson, to_geojson
from copilot.engine.slide_viewer import EmbeddedSlideViewer
from copilot.session import Session
from copilot.tools import PATHOLOGY
from qupath_ext import DEFAULT_PORT, QuPathViewer
from qupath_ext.projects import load_annotations, paquo_available
from tests.fake_qupath import FakeEntryPoint, FakeJvm
from tests.test_slide_viewer import slide_case  # noqa: F401  (fixture)

SEQUENCE = [
    ("load_case", {}),
    ("zoom", {"direction": "in", "amount": 3, "unit": "factor", "x": 250, "y": 640}),
    ("pan", {"direction": "right", "amount": 0.3}),
    ("zoom", {"direction": "out", "amount": 40, "unit": "steps"}),
    ("viewer_point_to_wsi_coordinate", {"x": 123, "y": 876}),
    ("pan", {"x": 900, "y": 100}),
    ("zoom", {"unit": "magnification", "amount": 20}),
    ("set_image_type", {"image_type": "BRIGHTFIELD_H_DAB"}),
    ("record_view_evidence", {"label": "roi", "x": 400, "y": 420}),
    ("viewer_point_to_wsi_coordinate", {"x": 999, "y": 0}),
    ("zoom", {"direction": "in", "amount": 9999, "unit": "factor"}),
]


def _sessions(case: Path) -> tuple[Session, Session]:
    case_inputs = json.loads((case / "case.json").read_text())["inputs"]
    bridge = QuPathViewer(FakeEntryPoint(), FakeJvm())
    return (Session(EmbeddedSlideViewer(), PATHOLOGY, case, case_inputs), Session(bridge, PATHOLOGY, case, case_inputs))


def _comparable(result: dict) -> dict:
    out = {k: v for k, v in result.items() if k not in ("gui_state_summary", "on_overview_thumbnail")}
    if "direct_state_summary" in out:  # image type names differ only in how they are read
        out["direct_state_summary"] = out["direct_state_summary"].splitlines()[2:]
    return out


def test_bridge_maps_every_handler_like_the_embedded_viewer(slide_case: Path) -> None:  # noqa: F811
    embedded, bridged = _sessions(slide_case)
    for name, args in SEQUENCE:
        a, b = embedded.call(name, args), bridged.call(name, args)
        assert a.ok and b.ok, (name, a.error, b.error)
        assert _comparable(b.result) == _comparable(a.result), name
        sa, sb = embedded._viewer.state(), bridged._viewer.state()
        for key in ("center", "downsample", "magnification", "visible_region", "dimensions", "mpp"):
            assert sa[key] == sb[key], (name, key)
    assert bridged._viewer.image_type == "BRIGHTFIELD_H_DAB"


def test_bridge_refused_calls_restore_qupath(slide_case: Path) -> None:  # noqa: F811
    _, bridged = _sessions(slide_case)
    assert bridged.call("load_case", {}).ok
    assert bridged.call("zoom", {"direction": "in", "amount": 2}).ok
    before = bridged._viewer.state()
    for name, args in [
        ("zoom", {"direction": "out", "amount": 80, "unit": "magnification"}),
        ("pan", {"direction": "up", "x": 1, "y": 1}),
        ("load_image", {"path": "case.json"}),
    ]:
        assert not bridged.call(name, args).ok
        assert bridged._viewer.state() == before
    assert bridged.call("close", {}).ok
    assert bridged.call("pan", {"direction": "up"}).error["code"] == "no_image"


def test_bridge_screenshot_comes_from_qupath(slide_case: Path) -> None:  # noqa: F811
    _, bridged = _sessions(slide_case)
    out = bridged.call("load_case", {})
    assert out.ok and out.images[0].mime == "image/png"
    assert bridged.call("capture_viewer", {"label": "overview"}).images[0].label == "overview"


# ----- ground truth -----


def test_geojson_annotations_point_rules(tmp_path: Path) -> None:
    square = np.array([[0, 0], [100, 0], [100, 100], [0, 100]], dtype=float)
    hole = np.array([[40, 40], [60, 40], [60, 60], [40, 60]], dtype=float)
    anns = [Annotation("Tumor", square, (hole,)), Annotation("Exclusion", square + 200)]
    path = tmp_path / "a.geojson"
    path.write_text(json.dumps(to_geojson(anns)))
    back = read_geojson(path)
    assert [a.cls for a in back] == ["Tumor", "Exclusion"]
    tumour = back[0]
    assert tumour.contains(10, 10) and tumour.contains(100, 50) and tumour.contains(0, 0)  # edges count
    assert not tumour.contains(50, 50)  # in the hole
    assert tumour.contains(40, 50)  # on the hole's edge: still tissue
    assert not tumour.contains(100.5, 50)
    assert tumour.area() == pytest.approx(100 * 100 - 20 * 20)
    multi = {
        "type": "Feature",
        "geometry": {
            "type": "MultiPolygon",
            "coordinates": [[[[0, 0], [1, 0], [1, 1], [0, 0]]], [[[5, 5], [6, 5], [6, 6], [5, 5]]]],
        },
        "properties": {"classification": {"name": "DCIS"}},
    }
    assert [a.cls for a in parse_features(multi)] == ["DCIS", "DCIS"]
    assert load_annotations(path)[1].contains(250, 250)


# ----- live QuPath (skipped without one) -----


def _gateway_up(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex(("127.0.0.1", port)) == 0


LIVE_PORT = int(os.environ.get("MEDCOPILOT_QUPATH_PORT", DEFAULT_PORT))


@pytest.mark.qupath
@pytest.mark.skipif(not _gateway_up(LIVE_PORT), reason="no QuPath Py4J gateway on this machine")
def test_live_quppath_viewer_round_trip(slide_case: Path) -> None:  # noqa: F811
    viewer = QuPathViewer.connect(LIVE_PORT, os.environ.get("MEDCOPILOT_QUPATH_TOKEN"))
    viewer.open(slide_case / "images" / "slide.tif")
    viewer.set_downsample(2.0)
    viewer.set_centre(3000, 2000)
    x, y = viewer.point_to_level0(500, 500)
    assert abs(x - 3000) <= 2 and abs(y - 2000) <= 2
    assert viewer.render().size[0] > 100


@pytest.mark.qupath
@pytest.mark.skipif(not paquo_available(), reason="paquo needs a QuPath installation")
def test_paquo_reads_a_project(tmp_path: Path) -> None:
    from paquo.projects import QuPathProject
    from shapely.geometry import Polygon

    with QuPathProject(tmp_path / "proj", mode="x") as project:
        entry = project.add_image(str(tmp_path / "missing.tif"), allow_missing=True)
        entry.hierarchy.add_annotation(roi=Polygon([(0, 0), (10, 0), (10, 10)]), path_class=None)
    anns = load_annotations(tmp_path / "proj")
    assert len(anns) == 1 and anns[0].contains(5, 1)
