"""The copilot on the image a pathologist already has open in QuPath, over a real JVM (the Java fixture in
`tests/java`, QuPath's class names and signatures, served by Py4J's GatewayServer): the session adopts the
open image, a conversation's answer cites two slide points, and QuPath's hierarchy then holds two locked
"MedCopilot evidence" point annotations at those level-0 coordinates, read back through the Java API, with
QuPath's GeoJSON; a Java exception while writing is a named error and leaves the hierarchy unchanged."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from copilot.cases.slides import write_pyramid
from copilot.errors import HandlerError
from copilot.host.qupath import adopt_open_image
from copilot.host.slicer import model_settings
from qupath_ext.evidence import EVIDENCE_CLASS, EVIDENCE_RGB, EvidenceWriter, SlideMark
from qupath_ext.open_image import MODEL_IMAGE_NAME, OpenImageViewer
from tests.fake_openai import FakeOpenAI, tool
from tests.qupath_jvm import QuPathJvm

W, H = 3000, 2000
SLIDE_NAME = "Smith_John_S22-04711.tif"  # a file name that identifies: never sent to the model
USER_NOTE = "Smith margin check"  # the pathologist's own annotation name: never sent either
POINTS = [(1200.5, 900.25), (2400.0, 1500.0)]
FX_THREAD = "JavaFX Application Thread"


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    img = np.full((H, W, 3), (236, 226, 236), dtype=np.uint8)
    img[400:1700, 800:2600] = (220, 140, 185)
    path = tmp_path_factory.mktemp("wsi") / SLIDE_NAME
    write_pyramid(path, img, mpp=0.25, downsamples=(1, 4, 16), bigtiff=False)
    return path


@pytest.fixture
def viewer(jvm: QuPathJvm, slide: Path) -> Iterator[OpenImageViewer]:
    """QuPath with the slide opened "by the user" and one annotation of theirs on it."""
    v = OpenImageViewer.connect(jvm.port, jvm.token)
    v.open(slide)
    j = v.jvm
    roi = j.qupath.lib.roi.ROIs.createRectangleROI(
        900.0, 500.0, 300.0, 200.0, j.qupath.lib.regions.ImagePlane.getDefaultPlane()
    )
    tumor = j.qupath.lib.objects.classes.PathClass.fromString(
        "Tumor", j.qupath.lib.common.ColorTools.packRGB(200, 0, 0)
    )
    own = j.qupath.lib.objects.PathObjects.createAnnotationObject(roi, tumor)
    own.setName(USER_NOTE)
    v.image_data().getHierarchy().addObject(own)
    yield v
    v.disconnect()


def _annotations(v: OpenImageViewer) -> list[Any]:
    return list(v.image_data().getHierarchy().getAnnotationObjects())


def _answer() -> str:
    locs = [{"x": x, "y": y, "label": f"atypical gland {n + 1}"} for n, (x, y) in enumerate(POINTS)]
    return "Two atypical glands; please review.\n" + json.dumps({"answer": "atypia", "localizations": locs})


SCRIPT = [
    {"tool_calls": [tool("zoom", {"direction": "in", "amount": 4, "unit": "factor"})]},  # rejected
    {"tool_calls": [tool("list_annotations", {})]},
    {"tool_calls": [tool("viewer_point_to_wsi_coordinate", {"x": 400, "y": 450})]},
    {"content": _answer()},
]


def _converse(host: Any, decisions: list[tuple[str, str]]) -> None:
    conv = host.conversation
    conv.ask("Where are the atypical glands?")
    last = None
    for decision, reason in decisions:
        deadline = time.monotonic() + 30
        while (p := conv.pending) is None or p is last or p.status != "pending":
            assert time.monotonic() < deadline, "no proposal came"
            time.sleep(0.01)
        last = p
        if decision == "approve":
            conv.approve()
        else:
            conv.reject(reason)
    assert conv.wait(30)


def _texts(requests: list[dict[str, Any]]) -> str:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "image_url"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return json.dumps(strip(requests))


def test_the_answers_points_become_locked_evidence_annotations_in_qupath(
    viewer: OpenImageViewer, tmp_path: Path
) -> None:
    fake = FakeOpenAI(SCRIPT)
    try:
        settings = lambda: model_settings(fake.base_url, "m")  # noqa: E731
        before = _annotations(viewer)
        events_before = viewer.jvm.medcopilot.fixture.Faults.changeEvents(viewer.image_data().getHierarchy())
        host = adopt_open_image(viewer, tmp_path / "trace", settings=settings)
        facts = host.image_facts
        assert facts["dimensions"] == [W, H] and facts["mpp"] == [0.25, 0.25] and facts["levels"] == 3
        assert facts["name"] == SLIDE_NAME or facts["path"].endswith(SLIDE_NAME)
        _converse(host, [("reject", "stay at this magnification"), ("approve", ""), ("approve", "")])
        conv = host.conversation
        assert conv.turns[0].status == "done" and host.errors == []
        assert [(a.handler, a.status) for a in conv.actions if a.actor == "agent"] == [
            ("zoom", "rejected"), ("list_annotations", "ok"), ("viewer_point_to_wsi_coordinate", "ok")
        ]  # fmt: skip
        listed = next(
            a for a in host.session.trace_events() if a["type"] == "handler_call" and a["handler"] == "list_annotations"
        )["result"]
        assert listed["count"] == 1 and listed["annotations"][0]["class"] == "Tumor"
        assert listed["annotations"][0]["bounds"] == [900.0, 500.0, 300.0, 200.0]

        # read back through QuPath's Java API
        after = _annotations(viewer)
        new = [o for o in after if o not in before]
        assert len(after) == len(before) + 2 and len(new) == 2
        for obj, (x, y), n in zip(new, POINTS, (1, 2), strict=True):
            roi = obj.getROI()
            assert str(roi.getRoiName()) == "Points" and roi.isPoint()
            assert (roi.getCentroidX(), roi.getCentroidY()) == pytest.approx((x, y), abs=1e-9)
            assert str(obj.getPathClass().getName()) == EVIDENCE_CLASS and obj.isLocked()
            assert str(obj.getName()) == f"Q1 atypical gland {n}"
            feature = EvidenceWriter(viewer).geojson(obj)
            assert feature["type"] == "Feature" and feature["geometry"]["type"] == "MultiPoint"
            assert feature["geometry"]["coordinates"] == [[pytest.approx(x), pytest.approx(y)]]
            props = feature["properties"]
            assert props["objectType"] == "annotation" and props["isLocked"] is True
            assert props["classification"] == {"name": EVIDENCE_CLASS, "color": list(EVIDENCE_RGB)}
        faults = viewer.jvm.medcopilot.fixture.Faults
        assert str(faults.lastAddThread()) == FX_THREAD
        assert faults.changeEvents(viewer.image_data().getHierarchy()) == events_before + 1  # one event for both
        assert [w["qupath_id"] for w in host.written] == [str(o.getID().toString()) for o in new]

        # nothing identifying went to the model; the trace records the write
        sent = _texts(fake.requests)
        for secret in (SLIDE_NAME, "Smith", "S22-04711", USER_NOTE):
            assert secret not in sent, secret
        assert MODEL_IMAGE_NAME in sent
        assert "stay at this magnification" in sent
        host.close()
        types = [
            e["type"]
            for e in json.loads("[" + ",".join((tmp_path / "trace" / "trace.jsonl").read_text().split("\n")[:-1]) + "]")
        ]
        assert "host_evidence_written" in types and "clinician_decision" in types
        assert len(_annotations(viewer)) == len(before) + 2  # closing leaves the annotations for the pathologist
    finally:
        fake.stop()


def test_a_java_exception_while_writing_is_a_named_error_and_changes_nothing(viewer: OpenImageViewer) -> None:
    writer = EvidenceWriter(viewer)
    hierarchy = viewer.image_data().getHierarchy()
    before = _annotations(viewer)
    viewer.jvm.medcopilot.fixture.Faults.failAddingAfter(1)  # QuPath takes the first object, then throws
    with pytest.raises(HandlerError) as err:
        writer.write([SlideMark("a", *POINTS[0]), SlideMark("b", *POINTS[1])])
    assert err.value.code == "qupath_error" and "unchanged" in err.value.message
    assert _annotations(viewer) == before and len(list(hierarchy.getAnnotationObjects())) == len(before)
    # invalid items are refused before QuPath is touched
    with pytest.raises(HandlerError) as err:
        writer.write([SlideMark("inside", 10, 10), SlideMark("outside", W + 5, 10)])
    assert err.value.code == "out_of_image" and _annotations(viewer) == before
    # a region becomes a rectangle annotation
    (obj,) = writer.write([SlideMark("region", 100, 200, 300, 150)])
    assert str(obj.getROI().getRoiName()) == "Rectangle" and obj.getROI().getArea() == 300 * 150
    assert EvidenceWriter(viewer).geojson(obj)["geometry"]["type"] == "Polygon"


def test_a_refused_write_during_a_conversation_is_shown_and_recorded(viewer: OpenImageViewer, tmp_path: Path) -> None:
    fake = FakeOpenAI([{"content": _answer()}])
    try:
        host = adopt_open_image(viewer, tmp_path / "t", settings=lambda: model_settings(fake.base_url, "m"))
        host.conversation.approve_each = False
        before = _annotations(viewer)
        viewer.jvm.medcopilot.fixture.Faults.failAddingAfter(0)
        _converse(host, [])
        assert host.errors and host.errors[0].startswith("qupath_error")
        assert _annotations(viewer) == before and host.written == []
        assert any(e["type"] == "host_evidence_failed" for e in host.session.trace_events())
    finally:
        fake.stop()


def test_no_open_image_is_refused(jvm: QuPathJvm) -> None:
    v = OpenImageViewer.connect(jvm.port, jvm.token)
    try:
        v.close()
        with pytest.raises(HandlerError, match="no image"):
            adopt_open_image(v)
    finally:
        v.disconnect()


def test_the_pathologists_side_panel_drives_the_conversation(
    qtbot: Any, viewer: OpenImageViewer, tmp_path: Path
) -> None:
    """`medcopilot gui --qupath`'s panel: a question typed and asked, proposals approved and rejected with the
    buttons, the answer's points listed and written into QuPath, the Store off ("nothing to store for this study");
    a picture of it (docs/qupath_panel.png with MEDCOPILOT_SCREENSHOTS=docs)."""
    import os

    from copilot.gui.host_panel import HostPanel

    fake = FakeOpenAI(SCRIPT)
    try:
        host = adopt_open_image(viewer, tmp_path / "trace", settings=lambda: model_settings(fake.base_url, "m"))
        panel = HostPanel(host, "MedCopilot — QuPath")
        qtbot.addWidget(panel)
        panel.resize(440, 940)
        panel.show()
        assert SLIDE_NAME.removesuffix(".tif") in panel.inventory.text()  # shown to the pathologist, not the model
        assert "3000×2000 px, 0.250 µm/px, 3 levels" in panel.inventory.text()
        panel.question.setText("Where are the atypical glands?")
        panel.ask_button.click()
        conv = host.conversation
        last = None
        for n in range(3):
            qtbot.waitUntil(lambda last=last: conv.pending is not None and conv.pending is not last, timeout=20000)
            last = conv.pending
            panel.refresh()
            assert panel.approve_button.isEnabled() and panel.pending.text().startswith("Proposed:")
            if n == 0:
                panel.reason.setText("stay at this magnification")
                panel.reject_button.click()
            else:
                panel.approve_button.click()
        qtbot.waitUntil(lambda: not conv.busy and panel.evidence_list.count() == 2, timeout=20000)
        panel.refresh()
        assert "rejected — stay at this magnification" in panel.action_list.item(1).text()
        assert len(host.written) == 2 and not panel.approve_button.isEnabled()
        picture = Path(os.environ.get("MEDCOPILOT_SCREENSHOTS", tmp_path)) / "qupath_panel.png"
        assert panel.grab().save(str(picture))
        panel.evidence_list.itemClicked.emit(panel.evidence_list.item(1))  # click: QuPath centres on the point
        assert (viewer.viewport.cx, viewer.viewport.cy) == pytest.approx(POINTS[1], abs=0.5)

        # Store: a slide's evidence as annotations (GeoJSON beside a slide file), after the clinician approves the plan
        assert panel.store_button.text() == "Store to PACS / Export…" and panel.store_button.isEnabled()
        asked: list[Any] = []

        def dialog(plan: Any) -> tuple[str, str]:
            asked.append(plan)
            return "approve", ""

        assert panel.store(ask=dialog) == ["nothing to store: the slide annotations: no slide point or recorded view "
                                           "to store yet"] and asked == []  # the answer's points live in QuPath only
        assert host.session.call("record_view_evidence", {"label": "tumour edge", "x": 500, "y": 500},
                                 actor="clinician").ok  # fmt: skip
        said = panel.store(ask=dialog)
        assert len(asked) == 1 and [s.handler for s in asked[0].steps] == ["export_slide_annotations"], said
        assert said == ["clinician_annotations.geojson: written"], said
        events = host.session.trace_events()
        attempts = [e for e in events if e["type"] == "write_attempt"]
        assert [(e["handler"], e["decision"], e["actor"]) for e in attempts] == [
            ("export_slide_annotations", "approved", "clinician")]  # fmt: skip
        host.close()
    finally:
        fake.stop()


def test_gui_qupath_attaches_to_the_running_qupath(jvm: QuPathJvm, viewer: OpenImageViewer, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, qtbot: Any) -> None:  # fmt: skip
    from copilot.cli import main

    monkeypatch.setenv("MEDCOPILOT_QUPATH_TOKEN", jvm.token)
    shot = tmp_path / "panel.png"
    args = ["gui", "--qupath", str(jvm.port), "--trace-dir", str(tmp_path / "t"), "--screenshot", str(shot)]
    assert main(args) == 0 and shot.stat().st_size > 5000
    head = json.loads((tmp_path / "t" / "trace.jsonl").read_text().splitlines()[0])
    assert head["backend"] == "qupath" and head["module"] == "host_pathology"
    monkeypatch.setenv("MEDCOPILOT_QUPATH_TOKEN", "wrong")
    assert main(args) == 2


def test_an_answer_cites_points_and_regions_with_their_labels() -> None:
    from copilot.host.qupath import slide_citations
    from qupath_ext.evidence import marks

    answer = (
        'Two foci. {"draft": true} Final: {"answer": "DCIS", "localizations": [{"x": 10, "y": 20.5, "label": "focus"},'
        ' {"x": "bad"}], "regions": [{"x": 100, "y": 200, "width": 50, "height": 40}]}'
    )
    items = slide_citations(answer)
    assert [(e["kind"], e["label"]) for e in items] == [("wsi_point", "focus"), ("wsi_region", "answer region 1")]
    assert items[1]["center"] == [125.0, 220.0]
    assert marks(items) == [SlideMark("focus", 10.0, 20.5), SlideMark("answer region 1", 100.0, 200.0, 50.0, 40.0)]
    assert slide_citations("no JSON here") == []
