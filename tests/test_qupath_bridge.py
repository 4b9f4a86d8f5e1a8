"""The QuPath bridge over a real JVM: the Java fixture in `tests/java` (QuPath's class and method names and
signatures) served by Py4J's own GatewayServer with an auth token, driven through the pathology handlers
and compared with the embedded viewer; Java exceptions, a gateway dying mid-episode and a wrong token.
Live tests (marked `qupath`) run against a real QuPath's Py4J gateway when there is one."""

from __future__ import annotations

import io
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from py4j.protocol import Py4JJavaError

from copilot.cases.annotations import Annotation, parse_features, read_geojson, to_geojson
from copilot.cases.slides import write_pyramid
from copilot.engine.slide.viewer import MIN_DOWNSAMPLE, EmbeddedSlideViewer
from copilot.replay import read_events, replay
from copilot.runtime import open_session
from copilot.session import Session
from copilot.tools import PATHOLOGY
from qupath_ext import DEFAULT_PORT, QuPathViewer
from qupath_ext.projects import load_annotations, paquo_available
from tests.qupath_jvm import QuPathJvm, jdk_available
from tests.test_slide_viewer import MARKER, MARKER_HALF, H, W, slide_case  # noqa: F401  (fixture)

needs_jdk = pytest.mark.skipif(not jdk_available(), reason="no JDK (javac); `make test` installs openjdk-17")

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


@pytest.fixture(scope="module")
def gateway_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The slide case of the viewer tests, written as classic TIFF (the JDK's TIFF reader has no BigTIFF)."""
    case = tmp_path_factory.mktemp("gateway_case")
    img = np.full((H, W, 3), (236, 226, 236), dtype=np.uint8)
    img[500:3500, 600:2600] = (220, 140, 185)
    mx, my = MARKER
    img[my - MARKER_HALF : my + MARKER_HALF, mx - MARKER_HALF : mx + MARKER_HALF] = (0, 200, 0)
    write_pyramid(case / "images" / "slide.tif", img, mpp=0.25, downsamples=(1, 4, 16), bigtiff=False)
    (case / "notes.json").write_text("{}")
    meta = {"case_id": "slide_1", "module": "breast_wsi", "inputs": {"slide": "images/slide.tif"}}
    (case / "case.json").write_text(json.dumps(meta))
    return case


@pytest.fixture
def bridge(jvm: QuPathJvm) -> Iterator[QuPathViewer]:
    viewer = QuPathViewer.connect(jvm.port, jvm.token)
    yield viewer
    viewer.disconnect()


def _sessions(case: Path, bridge: QuPathViewer) -> tuple[Session, Session]:
    case_inputs = json.loads((case / "case.json").read_text())["inputs"]
    return (Session(EmbeddedSlideViewer(), PATHOLOGY, case, case_inputs), Session(bridge, PATHOLOGY, case, case_inputs))


def _comparable(result: dict) -> dict:
    out = {k: v for k, v in result.items() if k not in ("gui_state_summary", "on_overview_thumbnail")}
    if "direct_state_summary" in out:  # image type names differ only in how they are read
        out["direct_state_summary"] = out["direct_state_summary"].splitlines()[2:]
    return out


def _marker_on_screen(png: bytes) -> tuple[float, float]:
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    ys, xs = np.nonzero((rgb[..., 1] > 150) & (rgb[..., 0] < 90) & (rgb[..., 2] < 90))
    return float(xs.mean() + 0.5), float(ys.mean() + 0.5)


@needs_jdk
def test_gateway_handlers_match_the_embedded_viewer(gateway_case: Path, bridge: QuPathViewer) -> None:
    """Coordinates, zoom by factor/steps/magnification, pans and point conversion agree through the JVM."""
    embedded, bridged = _sessions(gateway_case, bridge)
    for name, args in SEQUENCE:
        a, b = embedded.call(name, args), bridged.call(name, args)
        assert a.ok and b.ok, (name, a.error, b.error)
        assert _comparable(b.result) == _comparable(a.result), name
        sa, sb = embedded._viewer.state(), bridged._viewer.state()
        for key in ("center", "downsample", "magnification", "visible_region", "dimensions", "mpp"):
            assert sa[key] == sb[key], (name, key)
    assert bridged._viewer.image_type == "BRIGHTFIELD_H_DAB"
    assert bridge.state()["level_downsamples"] == [1.0, 4.0, 16.0]


@needs_jdk
def test_a_trace_on_qupath_names_it_and_replay_says_it_cannot_open_it(
    gateway_case: Path, bridge: QuPathViewer, tmp_path: Path
) -> None:
    session = open_session(gateway_case, viewer=bridge, trace_dir=tmp_path / "t")
    assert session.call("pan", {"direction": "right", "amount": 0.3}).ok
    session.close()
    assert read_events(tmp_path / "t")[0][0]["backend"] == "qupath"  # not the embedded viewer it did not run on
    report = replay(tmp_path / "t")
    assert not report.ok and "'qupath' viewer" in (report.divergence or "")


@needs_jdk
def test_gateway_zoom_limits_and_clamping(gateway_case: Path, bridge: QuPathViewer) -> None:
    _, bridged = _sessions(gateway_case, bridge)
    assert bridged.call("load_case", {}).ok
    out = bridged.call("zoom", {"direction": "in", "amount": 10000, "unit": "factor"})
    assert out.ok and out.result["clamped"] and bridge.viewport.downsample == pytest.approx(MIN_DOWNSAMPLE)
    out = bridged.call("zoom", {"direction": "out", "amount": 10000, "unit": "factor"})
    assert out.ok and out.result["clamped"] and bridge.viewport.downsample == pytest.approx(max(W, H) / 100)
    assert bridged.call("pan", {"direction": "left", "amount": 50, "unit": "fraction"}).ok
    assert bridge.viewport.cx == 0.0  # the centre stays on the image
    assert bridge.set_centre(10**9, -5) and (bridge.viewport.cx, bridge.viewport.cy) == (W, 0.0)
    repaints = bridge.ep.getCurrentViewer().getRepaintCount()
    assert bridge.set_downsample(3) is False and bridge.viewport.downsample == 3.0  # a Python int reaches a double
    assert bridge.ep.getCurrentViewer().getRepaintCount() > repaints  # QuPath's setters repaint the viewer


@needs_jdk
def test_gateway_snapshot_shows_the_marker_where_the_conversion_says(gateway_case: Path, bridge: QuPathViewer) -> None:
    _, bridged = _sessions(gateway_case, bridge)
    assert bridged.call("load_case", {}).ok
    for downsample, dx, dy in ((2.0, 120.0, -80.0), (0.5, -30.0, 20.0), (6.0, 400.0, 300.0)):
        bridge.set_downsample(downsample)
        bridge.set_centre(MARKER[0] + dx * downsample, MARKER[1] + dy * downsample)
        out = bridged.call("capture_viewer", {"label": "marker"})
        assert out.ok and out.images[0].mime == "image/png"
        sx, sy = _marker_on_screen(out.images[0].data)
        vp = bridge.viewport
        assert (sx, sy) == pytest.approx(vp.level0_to_screen(*MARKER), abs=1.5)
        x, y = bridge.point_to_level0(sx / vp.width * 1000, sy / vp.height * 1000)
        assert (x, y) == pytest.approx(MARKER, abs=2 * max(1.0, downsample))
    png = bridge.ep.snapshot(bridge.ep.getCurrentViewer())  # byte[] arrives as bytes
    assert isinstance(png, bytes) and Image.open(io.BytesIO(png)).size == (1024, 768)


@needs_jdk
def test_gateway_open_failure_is_a_refusal(gateway_case: Path, bridge: QuPathViewer) -> None:
    """openImage runs on the FX thread (the fixture refuses it elsewhere); a file it cannot read changes nothing."""
    _, bridged = _sessions(gateway_case, bridge)
    assert bridged.call("load_case", {}).ok
    assert bridged.call("zoom", {"direction": "in", "amount": 2}).ok
    before = bridge.state()
    for name, args in [
        ("zoom", {"direction": "out", "amount": 80, "unit": "magnification"}),
        ("pan", {"direction": "up", "x": 1, "y": 1}),
        ("load_image", {"path": "notes.json"}),
    ]:
        assert not bridged.call(name, args).ok
        assert bridge.state() == before
    out = bridged.call("load_image", {"path": "notes.json"})
    assert out.error["code"] == "load_failed" and "notes.json" in out.error["message"]
    with pytest.raises(Py4JJavaError, match="JavaFX application thread"):  # straight from a Py4J thread: refused
        bridge.ep.getQuPath().openImage(
            bridge.ep.getCurrentViewer(), str(gateway_case / "images" / "slide.tif"), False, False
        )
    assert bridged.call("close", {}).ok
    assert bridged.call("pan", {"direction": "up"}).error["code"] == "no_image"


@needs_jdk
def test_gateway_java_exception_surfaces_as_handler_error(
    gateway_case: Path, bridge: QuPathViewer, tmp_path: Path
) -> None:
    """A slide cut short under QuPath: the snapshot's IOException comes back as a handler error with its message."""
    broken = tmp_path / "case"
    (broken / "images").mkdir(parents=True)
    slide = broken / "images" / "slide.tif"
    slide.write_bytes((gateway_case / "images" / "slide.tif").read_bytes())
    (broken / "case.json").write_text((gateway_case / "case.json").read_text())
    _, bridged = _sessions(broken, bridge)
    assert bridged.call("load_case", {}).ok
    with slide.open("r+b") as fh:
        fh.truncate(4096)  # the tiles are gone, the header QuPath already read is not
    before = bridge.state()
    out = bridged.call("zoom", {"direction": "in", "amount": 4})
    assert not out.ok and out.error["code"] == "qupath_error"
    assert "IOException" in out.error["message"] or "EOFException" in out.error["message"], out.error
    assert bridge.state() == before  # the refused zoom was undone in QuPath


@needs_jdk
def test_gateway_dying_mid_episode(gateway_case: Path, tmp_path: Path) -> None:
    """The JVM is killed between calls: the next call is refused at once with a clear error; the trace is whole."""
    server = QuPathJvm()
    viewer = QuPathViewer.connect(server.port, server.token)
    session = open_session(gateway_case, trace_dir=tmp_path / "t", viewer=viewer)
    assert session.call("zoom", {"direction": "in", "amount": 2}).ok
    server.kill()
    t0 = time.perf_counter()
    out = session.call("pan", {"direction": "left"})
    assert time.perf_counter() - t0 < 5.0
    assert not out.ok and out.error["code"] == "qupath_unavailable" and "gateway" in out.error["message"]
    assert session.call("viewer_point_to_wsi_coordinate", {"x": 1, "y": 1}).error["code"] == "qupath_unavailable"
    session.close()
    events, failure = read_events(tmp_path / "t")
    assert failure is None
    calls = [e for e in events if e["type"] == "handler_call"]
    assert [c["ok"] for c in calls] == [True, True, False, False]
    assert calls[-2]["error"]["code"] == "qupath_unavailable"
    viewer.disconnect()


@needs_jdk
def test_gateway_refuses_a_wrong_token(jvm: QuPathJvm) -> None:
    for token in ("not-the-token", None):
        with pytest.raises(ConnectionError, match="token"):
            QuPathViewer.connect(jvm.port, token, read_timeout=5.0)
    viewer = QuPathViewer.connect(jvm.port, jvm.token)  # the gateway still serves the right token
    assert viewer.ep.getExtensionVersion() == "fixture"
    viewer.disconnect()


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


QUPATH_EXPORT = {  # the shape of QuPath 0.4+ "Export objects as GeoJSON" (GsonTools.PathClassTypeAdapter)
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "id": "0b7c2a52-0f3e-4b8e-9d55-0c4f5e0c6a11",
            "geometry": {
                "type": "Polygon",
                "coordinates": [
                    [[0, 0], [100, 0], [100, 100], [0, 100], [0, 0]],
                    [[40, 40], [60, 40], [60, 60], [40, 60], [40, 40]],
                ],
            },
            "properties": {"objectType": "annotation", "classification": {"name": "Tumor", "color": [200, 0, 0]}},
        },
        {
            "type": "Feature",
            "id": "5d1f7e0a-8c53-4f0b-a0e2-6a1b9f3c2d44",
            "geometry": {
                "type": "MultiPolygon",
                "coordinates": [
                    [[[200, 200], [260, 200], [260, 260], [200, 260], [200, 200]]],
                    [
                        [[300, 300], [400, 300], [400, 400], [300, 400], [300, 300]],
                        [[320, 320], [340, 320], [340, 340], [320, 340], [320, 320]],
                    ],
                ],
            },
            "properties": {
                "objectType": "annotation",
                "classification": {"names": ["Tumor", "Positive"], "color": [255, 128, 0]},
            },
        },
    ],
}


def test_qupath_geojson_round_trips(tmp_path: Path) -> None:
    """Classification name and colour (derived names too), holes and multipolygons survive read → write → read."""
    anns = parse_features(QUPATH_EXPORT)
    assert [(a.cls, a.colour, len(a.holes)) for a in anns] == [
        ("Tumor", (200, 0, 0), 1),
        ("Tumor: Positive", (255, 128, 0), 0),
        ("Tumor: Positive", (255, 128, 0), 1),
    ]
    assert anns[1].object_id == anns[2].object_id == "5d1f7e0a-8c53-4f0b-a0e2-6a1b9f3c2d44"
    assert len(anns[0].exterior) == 4  # rings are kept open; writing closes them
    assert to_geojson(anns) == QUPATH_EXPORT  # QuPath's own form, feature for feature
    path = tmp_path / "export.geojson"
    path.write_text(json.dumps(to_geojson(anns)))
    again = read_geojson(path)
    assert [(a.cls, a.colour, a.object_id) for a in again] == [(a.cls, a.colour, a.object_id) for a in anns]
    for a, b in zip(anns, again, strict=True):
        assert np.array_equal(a.exterior, b.exterior) and all(map(np.array_equal, a.holes, b.holes))
    assert not again[2].contains(330, 330) and again[2].contains(310, 310) and again[1].contains(230, 230)
    assert again[2].area() == pytest.approx(100 * 100 - 20 * 20)


def test_geojson_reads_pre_0_4_classifications() -> None:
    """QuPath < 0.4 wrote the class colour as a packed ARGB integer (colorRGB); a bare string names a class."""
    ring = [[0, 0], [1, 0], [1, 1], [0, 0]]
    old = {
        "type": "Feature",
        "geometry": {"type": "Polygon", "coordinates": [ring]},
        "properties": {"classification": {"name": "Stroma", "colorRGB": -3670016}},
    }
    bare = {
        "type": "Feature",
        "geometry": {"type": "Polygon", "coordinates": [ring]},
        "properties": {"classification": "Necrosis"},
    }
    (a,), (b,) = parse_features(old), parse_features(bare)
    assert (a.cls, a.colour) == ("Stroma", (200, 0, 0)) and (b.cls, b.colour) == ("Necrosis", None)


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
