"""The copilot on a study the radiologist already has open in Slicer (slicer-core's standalone scene): the
scene is adopted as the user left it, a two-turn conversation with one rejected proposal runs against a
scripted OpenAI-compatible service, and afterwards only what the clinician approved has changed, the cited
points are locked markups at their RAS, the trace replays and no DICOM identifier reached the model."""

from __future__ import annotations

import json
import threading
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if find_spec("slicer_core") is None:  # present-or-not without importing it at collection
    pytest.skip("needs slicer-core", allow_module_level=True)
SimpleITK = pytest.importorskip("SimpleITK")

from copilot.host.panel import MainThreadCalls  # noqa: E402
from copilot.host.slicer import SlicerHost, model_settings  # noqa: E402
from copilot.replay import replay  # noqa: E402
from copilot.slicer_backend.markups import POINTS_NODE_NAME  # noqa: E402
from copilot.slicer_backend.mrml import application, mrml  # noqa: E402
from copilot.slicer_backend.scene import SlicerScene, attach, standalone_scene  # noqa: E402
from copilot.slicer_backend.viewer import np_matrix  # noqa: E402
from tests.fake_openai import FakeOpenAI, tool  # noqa: E402

IDENTIFIERS = {
    "patient_name": "DOE^JANE",
    "patient_id": "PAT-88412",
    "birth_date": "19610412",
    "study_date": "20240102",
    "study_uid": "1.2.826.0.1.3680043.8.498.11223344",
    "series_uid": "1.2.826.0.1.3680043.8.498.55667788",
    "instance_uids": "1.2.826.0.1.3680043.8.498.90011 1.2.826.0.1.3680043.8.498.90012",
}
LESION_RAS = (-12.0, 8.0, 14.0)  # centre of the bright sphere, in the volume's RAS
SECOND_RAS = (10.0, -6.0, -4.0)
USER_WINDOW, USER_LEVEL = 600.0, 300.0


def _write_volume(path: Path) -> None:
    """A 64×64×40 MR-like phantom (1 × 1 × 2 mm) with a bright sphere at LESION_RAS, as NRRD (LPS on disk)."""
    data = np.full((40, 64, 64), 100, dtype=np.int16)
    img = SimpleITK.GetImageFromArray(data)
    img.SetSpacing((1.0, 1.0, 2.0))
    img.SetOrigin((32.0, 32.0, -40.0))  # LPS on disk; i runs to the right, j anteriorly: RAS (-32 + i, -32 + j)
    img.SetDirection((-1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0))
    arr = SimpleITK.GetArrayFromImage(img)
    k, j, i = np.indices(arr.shape)
    ras = np.stack([-32.0 + i, -32.0 + j, -40.0 + 2.0 * k], axis=-1)
    arr[np.linalg.norm(ras - np.array(LESION_RAS), axis=-1) <= 6.0] = 900
    out = SimpleITK.GetImageFromArray(arr)
    out.CopyInformation(img)
    SimpleITK.WriteImage(out, str(path))


def _user_scene(tmp: Path) -> tuple[SlicerScene, Any]:
    """What a radiologist did in Slicer: a volume read by Slicer's reader, filed under a DICOM patient and study,
    a window/level, a one-up Red layout and the Red view at the lesion's level. Inside the Slicer application
    this is slicer.mrmlScene (emptied first) with the application's logic; elsewhere slicer-core's scene."""
    path = tmp / "Doe_Jane_t1_post.nrrd"
    _write_volume(path)
    app = application()
    if app is not None:  # pragma: no cover - inside Slicer (tests/run_in_slicer.py)
        app.mrmlScene.Clear(False)
        s = attach(app.mrmlScene, app.app.applicationLogic())
        node = app.util.loadVolume(str(path))
        node.SetName("Doe_Jane_t1_post")
    else:
        s = standalone_scene()
        volumes = mrml().vtkSlicerVolumesLogic()
        volumes.SetMRMLScene(s.scene)
        node = volumes.AddArchetypeVolume(str(path), "Doe_Jane_t1_post")
    node.SetAttribute("DICOM.instanceUIDs", IDENTIFIERS["instance_uids"])
    sh = s.scene.GetSubjectHierarchyNode()
    patient = sh.CreateSubjectItem(sh.GetSceneItemID(), IDENTIFIERS["patient_name"])
    for key, value in (
        ("PatientName", "patient_name"),
        ("PatientID", "patient_id"),
        ("PatientBirthDate", "birth_date"),
    ):
        sh.SetItemAttribute(patient, f"DICOM.{key}", IDENTIFIERS[value])
    study = sh.CreateStudyItem(patient, f"MRI BRAIN ({IDENTIFIERS['study_date']})")
    sh.SetItemAttribute(study, "DICOM.StudyDate", IDENTIFIERS["study_date"])
    sh.SetItemUID(study, "DICOM", IDENTIFIERS["study_uid"])
    series = sh.GetItemByDataNode(node) or sh.CreateItem(study, node)
    sh.SetItemParent(series, study)
    sh.SetItemAttribute(series, "DICOM.Modality", "MR")
    sh.SetItemAttribute(series, "DICOM.SeriesNumber", "3")
    sh.SetItemUID(series, "DICOM", IDENTIFIERS["series_uid"])
    display = node.GetDisplayNode()
    display.SetAndObserveColorNodeID("vtkMRMLColorTableNodeGrey")  # what Slicer's volumes module gives a new volume
    display.SetAutoWindowLevel(0)
    display.SetWindowLevel(USER_WINDOW, USER_LEVEL)
    s.layout_node.SetViewArrangement(mrml().vtkMRMLLayoutNode.SlicerLayoutOneUpRedSliceView)
    for logic in s.slice_logics.values():
        logic.GetSliceCompositeNode().SetBackgroundVolumeID(node.GetID())
        logic.GetSliceNode().SetDimensions(600, 480, 1)
        logic.FitSliceToAll()
    s.slice_logics["red"].SetSliceOffset(LESION_RAS[2])
    s.slice_logics["yellow"].GetSliceNode().SetFieldOfView(180.0, 144.0, 1.0)
    return s, node


def _user_state(s: SlicerScene, node: Any) -> dict[str, Any]:
    """Everything of the user's that must survive: volume node, display node, slice and composite nodes, layout."""
    d = node.GetDisplayNode()
    from vtkmodules.util import numpy_support
    from vtkmodules.vtkCommonMath import vtkMatrix4x4

    m = vtkMatrix4x4()
    node.GetIJKToRASMatrix(m)
    scalars = numpy_support.vtk_to_numpy(node.GetImageData().GetPointData().GetScalars())
    out: dict[str, Any] = {
        "volume": (node.GetName(), node.GetID(), np_matrix(m).round(9).tolist(), scalars.tobytes()),
        "volume_attrs": sorted(node.GetAttributeNames() or ()),
        "display": (d.GetWindow(), d.GetLevel(), d.GetAutoWindowLevel(), d.GetColorNodeID(),
                    sorted(d.GetAttributeNames() or ())),
        "layout": s.layout_node.GetViewArrangement(),
    }  # fmt: skip
    for view, logic in s.slice_logics.items():
        n, c = logic.GetSliceNode(), logic.GetSliceCompositeNode()
        out[f"slice_{view}"] = (
            n.GetOrientation(), np_matrix(n.GetSliceToRAS()).round(9).tolist(), tuple(n.GetFieldOfView()),
            tuple(n.GetDimensions()),
        )  # fmt: skip
        out[f"composite_{view}"] = (c.GetBackgroundVolumeID(), c.GetForegroundVolumeID(), c.GetForegroundOpacity())
    return out


def _evidence(ras: tuple[float, float, float]) -> str:
    return (
        "EVIDENCE:\n"
        f"KEY_SLICE_AXIAL_MM: {ras[2]}\nKEY_SLICE_SAGITTAL_MM: {ras[0]}\nKEY_SLICE_CORONAL_MM: {ras[1]}\n"
        f"RAS: [{ras[0]}, {ras[1]}, {ras[2]}]"
    )


SCRIPT = [
    # turn 1: a window the clinician rejects, then a move to the lesion and a recorded point, then the answer
    {"tool_calls": [tool("wl", {"window": 80, "level": 40, "view": "red"})]},
    {"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": LESION_RAS[2] - 2.0})]},
    {"tool_calls": [tool("record_point", {"ras": list(LESION_RAS), "label": "enhancing focus"})]},
    {"content": "A 12 mm enhancing focus in the left frontal region.\n" + _evidence(LESION_RAS)},
    # turn 2: answered from what is on screen, citing a second point
    {"content": "The opposite side looks normal; compare here.\n" + _evidence(SECOND_RAS)},
]


def _until(cond: Any, calls: MainThreadCalls, what: str) -> None:
    """Run the agent's queued calls here (the main thread) until `cond()` holds."""
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline, what
        calls.pump()
        time.sleep(0.005)


def _drive(host: SlicerHost, calls: MainThreadCalls, question: str, decisions: list[tuple[str, str]]) -> None:
    """Ask, then answer each proposal as the clinician would, in order."""
    conv = host.conversation
    conv.ask(question)
    last = None
    for decision, reason in decisions:
        _until(lambda last=last: (p := conv.pending) is not None and p is not last and p.status == "pending",
               calls, "no proposal came")  # fmt: skip
        last = conv.pending
        if decision == "approve":
            conv.approve()
        else:
            conv.reject(reason)
    _until(lambda: not conv.busy, calls, "the turn did not end")


def _adopt(s: SlicerScene, trace_dir: Path | None, base_url: str, key: str = "") -> tuple[SlicerHost, MainThreadCalls]:
    calls = MainThreadCalls()
    settings = lambda: model_settings(base_url, "test-model", key)  # noqa: E731
    return SlicerHost.adopt(s.scene, s.app_logic, trace_dir, settings=settings, on_host=calls), calls


def _texts(requests: list[dict[str, Any]]) -> list[Any]:
    """The requests with their images left out (base64 may contain any short word)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "image_url"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(requests)


@pytest.fixture
def fake() -> Any:
    server = FakeOpenAI(SCRIPT)
    yield server
    server.stop()


def test_the_copilot_adopts_the_users_scene_and_leaves_it_as_approved(tmp_path: Path, fake: FakeOpenAI) -> None:
    s, node = _user_scene(tmp_path)
    before = _user_state(s, node)
    trace_dir = tmp_path / "trace"
    host, calls = _adopt(s, trace_dir, fake.base_url, "sk-session-only")

    # the starting state is the user's: nothing changed by adopting, the model knows the volume by series
    assert _user_state(s, node) == before
    assert host.inventory_text() == ["MR series 3 (MR)"]
    assert host.session.snapshot()["layout"] == "one_up_red"
    assert host.session.snapshot()["display"][node.GetID()]["window"] == pytest.approx(USER_WINDOW)

    _drive(
        host, calls, "Is there an enhancing lesion?", [("reject", "keep my window"), ("approve", ""), ("approve", "")]
    )
    _drive(host, calls, "And the other side?", [])
    conv = host.conversation
    assert [t.status for t in conv.turns] == ["done", "done"]
    assert [(a.handler, a.status) for a in conv.actions if a.actor == "agent"] == [
        ("wl", "rejected"),
        ("set_slice_offset", "ok"),
        ("record_point", "ok"),
    ], [a.error for a in conv.actions]
    rejected = next(a for a in conv.actions if a.status == "rejected")
    assert rejected.reason == "keep my window"
    tool_replies = [m for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert "keep my window" in tool_replies[0]["content"]
    assert "Is there an enhancing lesion?" in json.dumps(fake.requests[4]["messages"])  # history in turn 2

    # only the approved move changed the user's nodes: the Red slice offset
    after = _user_state(s, node)
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"slice_red"}
    red = s.slice_logics["red"].GetSliceNode()
    assert red.GetSliceOffset() == pytest.approx(LESION_RAS[2] - 2.0)
    assert before["slice_red"][2:] == after["slice_red"][2:]  # field of view and dimensions kept

    # evidence: one locked markups node with the cited points at their RAS
    nodes = [n for n in host.markups.nodes() if n.GetName() == POINTS_NODE_NAME]
    assert len(nodes) == 1 and nodes[0].GetLocked() == 1
    points = [nodes[0].GetNthControlPointPosition(i) for i in range(nodes[0].GetNumberOfControlPoints())]
    assert len(points) == 3  # the recorded point, then each answer's RAS
    for got, want in zip(points, [LESION_RAS, LESION_RAS, SECOND_RAS], strict=True):
        assert np.allclose(got, want, atol=0.01)
    assert [e["label"] for e in conv.evidence if e["kind"] == "point"] == [
        "enhancing focus",
        "Q1 answer RAS",
        "Q2 answer RAS",
    ]

    # the clinician goes to an evidence item and exports the report; then closes, keeping every node
    assert conv.go_to(2).ok
    report = conv.export_report(tmp_path / "report.html").read_text()
    assert "keep my window" in report and report.count("<img") >= 3
    n_nodes = s.scene.GetNumberOfNodes()
    host.close()
    assert s.scene.GetNumberOfNodes() == n_nodes and s.scene.GetNodeByID(node.GetID()) is node

    # the trace replays on a fresh scene; no identifier and no key reached the model or the trace
    assert replay(trace_dir).ok, replay(trace_dir).summary()
    sent = json.dumps(_texts(fake.requests))
    recorded = (trace_dir / "trace.jsonl").read_text()
    for value in [*IDENTIFIERS.values(), *IDENTIFIERS["instance_uids"].split(), "DOE", "JANE", "Doe_Jane"]:
        assert value.lower() not in sent.lower(), value
        assert value not in recorded, value
    assert "sk-session-only" not in recorded
    assert len(fake.requests) == 5


def test_closing_removes_only_the_copilots_nodes_when_asked(tmp_path: Path, fake: FakeOpenAI) -> None:
    s, node = _user_scene(tmp_path)
    host, _calls = _adopt(s, None, fake.base_url)
    assert host.session.call("record_point", {"ras": list(LESION_RAS), "label": "x"}, actor="clinician").ok
    own = [n.GetID() for n in host.own_nodes()]
    assert own and all(s.scene.GetNodeByID(i) is not None for i in own)
    host.close(remove_own_nodes=True)
    assert all(s.scene.GetNodeByID(i) is None for i in own)
    assert s.scene.GetNodeByID(node.GetID()) is node and node.GetDisplayNode() is not None


def test_the_scene_is_never_cleared_and_a_scene_without_volumes_is_refused(tmp_path: Path, fake: FakeOpenAI) -> None:
    from copilot.errors import HandlerError

    with pytest.raises(HandlerError, match="no scalar volume"):
        SlicerHost.adopt(standalone_scene().scene, None)
    s, node = _user_scene(tmp_path)
    host, _calls = _adopt(s, None, fake.base_url)
    assert "open_case" not in [spec.name for spec in host.session.registry.specs("A")]
    out = host.session.call("open_case", {"dicom_dir": "x.nrrd"}, actor="clinician")
    assert not out.ok and out.error["code"] == "not_in_track"
    assert s.scene.GetNodeByID(node.GetID()) is node


def test_a_stop_ends_the_turn_without_running_the_proposal(tmp_path: Path) -> None:
    server = FakeOpenAI([{"tool_calls": [tool("wl", {"window": 80, "level": 40, "view": "red"})]}])
    try:
        s, node = _user_scene(tmp_path)
        host, calls = _adopt(s, None, server.base_url)
        host.conversation.ask("window?")
        _until(lambda: host.conversation.pending is not None, calls, "no proposal came")
        threading.Timer(0.05, host.conversation.stop).start()
        _until(lambda: not host.conversation.busy, calls, "the turn did not end")
        assert host.conversation.turns[0].status == "stopped"
        assert node.GetDisplayNode().GetWindow() == pytest.approx(USER_WINDOW)
    finally:
        server.stop()


def test_volume_names_never_repeat_an_identifier_and_unusable_volumes_are_left_out(tmp_path: Path) -> None:
    """Names: a second, non-DICOM volume named after the patient gets a neutral name (identifiers of every volume
    count); a CT-like volume without DICOM attributes is called CT; a volume under a transform or with colour
    components is left out, and the panel says why."""
    from copilot.slicer_backend.adopt import scene_volumes, skipped_volumes

    s, node = _user_scene(tmp_path)
    volumes = mrml().vtkSlicerVolumesLogic()
    volumes.SetMRMLScene(s.scene)
    ct = SimpleITK.GetImageFromArray(np.full((4, 8, 8), -1000, dtype=np.int16))
    SimpleITK.WriteImage(ct, str(tmp_path / "ct.nrrd"))
    named = volumes.AddArchetypeVolume(str(tmp_path / "ct.nrrd"), "jane doe ct")
    plain = volumes.AddArchetypeVolume(str(tmp_path / "ct.nrrd"), "baseline CT")
    moved = volumes.AddArchetypeVolume(str(tmp_path / "ct.nrrd"), "registered")
    moved.SetAndObserveTransformNodeID(s.scene.AddNewNodeByClass("vtkMRMLLinearTransformNode").GetID())
    found = {v.node_id: (v.name, v.modality) for v in scene_volumes(s.scene)}
    assert found == {
        node.GetID(): ("MR series 3", "MR"),
        named.GetID(): ("CT volume 2", "CT"),
        plain.GetID(): ("baseline CT", "CT"),
    }
    assert skipped_volumes(s.scene) == [("registered", "under a transform (the copilot's coordinates would not be "
                                                      "the ones Slicer shows)")]  # fmt: skip
