"""The `slicer` backend keeps its state in Slicer's MRML scene: node ids are the handler ids, derived
objects are Slicer nodes, nothing leaks between cases, and a refused or failed call leaves the scene
exactly as it was (node count, node ids, slice geometry, composite and display nodes, layout)."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from copilot.engine.volume.derived import TransformNode
from copilot.errors import HandlerError
from copilot.runtime import open_session
from copilot.session import Session
from copilot.tools import RADIOLOGY
from copilot.tools.registry import HandlerContext, HandlerOutput, Registry
from tests.conftest import backend_viewer
from tests.test_contract import BAD_CALLS, FIRST_ID

if find_spec("slicer_core") is None:  # present-or-not without importing it at collection
    pytest.skip("needs slicer-core", allow_module_level=True)


def fingerprint(session: Session) -> dict[str, Any]:
    """Everything of the MRML scene a handler may change."""
    viewer = session._viewer
    scene = viewer.scene
    nodes = [scene.GetNthNode(i) for i in range(scene.GetNumberOfNodes())]
    out: dict[str, Any] = {"ids": [n.GetID() for n in nodes], "layout": viewer.mrml.layout_node.GetViewArrangement()}
    for n in nodes:
        if n.IsA("vtkMRMLSliceNode"):
            m = n.GetSliceToRAS()
            out[n.GetID()] = (
                [round(m.GetElement(r, c), 9) for r in range(4) for c in range(4)],
                tuple(n.GetFieldOfView()),
                tuple(n.GetDimensions()),
                n.GetOrientation(),
                n.GetSliceSpacingMode(),
            )
        elif n.IsA("vtkMRMLSliceCompositeNode"):
            out[n.GetID()] = (
                n.GetBackgroundVolumeID(),
                n.GetForegroundVolumeID(),
                n.GetForegroundOpacity(),
                n.GetCompositing(),
            )
        elif n.IsA("vtkMRMLScalarVolumeDisplayNode"):
            out[n.GetID()] = (n.GetWindow(), n.GetLevel(), n.GetColorNodeID(), n.GetAttribute("MedCopilot.Preset"))
    return out


@pytest.fixture
def slicer_session(brain_case: Path) -> Session:
    return open_session(brain_case, viewer=backend_viewer("slicer"))


def test_refused_calls_leave_the_scene_unchanged(slicer_session: Session) -> None:
    assert slicer_session.call("zoom", {"view": "green", "factor": 1.7, "size": 64}).ok
    assert slicer_session.call("window_preset", {"preset": "mr_t2_flair", "size": 64}).ok
    before = fingerprint(slicer_session)
    first = slicer_session._viewer.volume_ids()[0]
    for name, args, code in BAD_CALLS:
        if isinstance(args, dict) and FIRST_ID in args.values():
            args = {k: first if v == FIRST_ID else v for k, v in args.items()}
        out = slicer_session.call(name, args)  # type: ignore[arg-type]
        assert not out.ok and out.error["code"] == code  # type: ignore[index]
        assert fingerprint(slicer_session) == before, name


def half_done(ctx: HandlerContext) -> HandlerOutput:
    """Change the whole scene, then fail (a stand-in for a handler failing half-way)."""
    viewer = ctx.viewer
    keep = viewer.volume(viewer.volume_ids()[0])
    viewer.clear()
    vid = viewer.add_volume(keep)
    viewer.recover_standard_views(vid)
    viewer.set_window_level(vid, 10.0, 5.0)
    viewer.set_layout("one_up_green")
    viewer.set_slice_step(3.0)
    viewer.zoom("red", 3.0)
    raise HandlerError("failed_half_way", "stopped after changing the scene")


def test_a_call_failing_half_way_restores_the_scene(brain_case: Path) -> None:
    registry = Registry("radiology")
    for spec in RADIOLOGY.specs():
        registry.register(spec)
    registry.handler(role="viewer_control")(half_done)
    session = open_session(brain_case, viewer=backend_viewer("slicer"))
    session.registry = registry
    assert session.call("set_slice_offset", {"view": "yellow", "offset": 6.0, "size": 64}).ok
    before, state = fingerprint(session), session.snapshot()
    out = session.call("half_done", {})
    assert not out.ok and out.error == {"code": "failed_half_way", "message": "stopped after changing the scene"}
    assert fingerprint(session) == before
    assert session.snapshot() == state
    assert session.call("observe", {"view": "all", "size": 64}).ok  # the restored nodes still draw


def test_node_ids_are_handler_ids_and_nothing_leaks(slicer_session: Session) -> None:
    viewer = slicer_session._viewer
    scene = viewer.scene
    ids = [v["id"] for v in slicer_session.call("get_viewer_state", {}).result["inventory"]]
    assert ids == [scene.GetNthNodeByClass(i, "vtkMRMLScalarVolumeNode").GetID() for i in range(len(ids))]
    assert {viewer.composite_node(n).GetBackgroundVolumeID() for n in ("red", "yellow", "green")} == {
        slicer_session.snapshot()["active_volume"]
    }
    count = scene.GetNumberOfNodes()
    for _ in range(2):
        assert slicer_session.call("open_case", {"size": 64}).ok
        assert scene.GetNumberOfNodes() == count  # the old case's volume and display nodes are gone


def test_segments_and_transforms_are_slicer_nodes(brain_case: Path) -> None:
    session = open_session(brain_case, track="B", viewer=backend_viewer("slicer"))
    scene = session._viewer.scene
    out = session.call(
        "segment_threshold", {"volume": "FLAIR", "output_segment": "bright", "lower": 0.5, "upper": 1e6, "size": 64}
    )
    assert out.ok, out.error
    [entry] = out.state["segments"]
    node = scene.GetNodeByID(entry["id"])
    assert node.IsA("vtkMRMLSegmentationNode") and node.GetName() == "bright"
    assert node.GetSegmentation().GetNumberOfSegments() == 1
    assert scene.GetFirstNodeByClass("vtkMRMLLabelMapVolumeNode") is None  # only used to import the label map
    fixed, moving = session._viewer.volume_ids()[:2]
    matrix = np.eye(4)
    matrix[:3, 3] = (2.0, -1.0, 0.5)
    tid = session._viewer.add_transform(TransformNode("shift", fixed, moving, matrix, "rigid", [], 0.0))
    mrml = scene.GetNodeByID(tid)
    assert mrml.IsA("vtkMRMLLinearTransformNode") and mrml.GetName() == "shift"
    to_parent = mrml.GetMatrixTransformToParent()
    assert [to_parent.GetElement(r, 3) for r in range(3)] == pytest.approx([-2.0, 1.0, -0.5])
    assert session._viewer.transform("shift")[0] == tid


def test_fusion_is_the_composite_node(slicer_session: Session) -> None:
    out = slicer_session.call(
        "fusion",
        {"background_volume_ref": "T1", "foreground_volume_ref": "FLAIR", "foreground_opacity": 0.4, "mode": "add"},
    )
    assert out.ok
    comp = slicer_session._viewer.composite_node("green")
    assert comp.GetForegroundVolumeID() == out.result["foreground_volume"]
    assert comp.GetForegroundOpacity() == pytest.approx(0.4) and comp.GetCompositing() == 2
    image = np.asarray(slicer_session._viewer.render("green", (96, 96)))
    assert image.ndim == 3 and image.max() > 0


def test_bench_scores_are_equal_on_both_backends_and_replay(tmp_path: Path) -> None:
    """`bench run --backend slicer` scores the offline policies exactly as the embedded engine does (the
    baseline's pixel-derived RAS may differ by hundredths of a mm), and its traces replay (states, results
    and image hashes) on a fresh Slicer scene."""
    from copilot.medflow import make_cases
    from copilot.medflow.bench_run import run_batch
    from copilot.replay import replay

    cases = tmp_path / "cases"
    make_cases("brain_mri", 2, 3, cases, spacing=3.0)
    make_cases("lung_petct", 1, 1, cases, spacing=3.0)
    scores: dict[str, dict[tuple[str, str], tuple[float, float, float | None]]] = {}
    traces: list[Path] = []
    for backend in ("embedded", "slicer"):
        for policy in ("prior", "baseline"):
            rows = run_batch(cases, policy, tmp_path / backend, workers=1, progress=None, backend=backend)
            for r in rows:
                assert r["status"] != "error", r["error"]
                assert r["backend"] == backend
                scores.setdefault(backend, {})[(policy, r["case_id"])] = (r["task"], r["strict"], r["loc"])
                if backend == "slicer" and policy == "baseline":
                    traces.append(tmp_path / backend / r["trace_dir"])
    assert len(scores["slicer"]) == 6
    assert scores["slicer"] == scores["embedded"]
    assert len(traces) == 3
    for trace in traces:
        report = replay(trace)
        assert report.ok, report.summary()


def test_evidence_is_markups(slicer_session: Session) -> None:
    scene = slicer_session._viewer.scene
    ras = slicer_session.snapshot()["views"]["red"]["center_ras"]
    assert slicer_session.call("record_point", {"ras": ras, "label": "lesion"}).ok
    assert slicer_session.call("measure_distance", {"ras_a": ras, "ras_b": [ras[0] + 10, ras[1], ras[2]]}).ok
    assert not slicer_session.call("record_point", {"ras": [1e5, 0, 0]}).ok  # refused: no new markup
    points = scene.GetFirstNodeByName("MedCopilot evidence")
    assert points.GetNumberOfControlPoints() == 1 and points.GetNthControlPointLabel(0) == "lesion"
    assert list(points.GetNthControlPointPosition(0)) == pytest.approx(ras)
    line = scene.GetFirstNodeByClass("vtkMRMLMarkupsLineNode")
    assert line.GetLineLengthWorld() == pytest.approx(10.0)


def test_volume_files_are_read_by_slicers_reader(slicer_session: Session) -> None:
    scene = slicer_session._viewer.scene
    for vid in slicer_session._viewer.volume_ids():
        storage = scene.GetNodeByID(vid).GetStorageNode()
        assert storage is not None and storage.IsA("vtkMRMLVolumeArchetypeStorageNode")
        assert Path(storage.GetFileName()).name.startswith(slicer_session._viewer.volume(vid).name)


def test_a_new_session_on_the_same_scene_removes_the_old_ones_nodes(brain_case: Path) -> None:
    from copilot.slicer_backend import new_slicer_viewer

    first = open_session(brain_case, viewer=backend_viewer("slicer"))
    scene, app_logic = first._viewer.scene, first._viewer.mrml.app_logic
    count = scene.GetNumberOfNodes()
    second = open_session(brain_case, viewer=new_slicer_viewer(scene, app_logic))
    assert scene.GetNumberOfNodes() == count
    assert sorted(second._viewer.volume_ids()) != sorted(first._viewer.volume_ids())  # new nodes, new ids
    assert all(scene.GetNodeByID(v) is None for v in first._viewer.volume_ids())


def _close(a: Any, b: Any, path: str = "") -> None:
    """Equal JSON values, floats within 1e-5."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, abs=1e-5), path
    elif isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for n, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{n}]")
    else:
        assert a == b, path


def test_both_backends_give_the_same_results_and_states(brain_case: Path) -> None:
    """The same calls on the embedded engine and the slicer backend: same results, same state snapshots."""
    script: list[tuple[str, dict[str, Any]]] = [
        ("set_slice_offset", {"view": "yellow", "offset": 7.0, "size": 64}),
        ("zoom", {"view": "green", "factor": 1.8, "center_1000": [300, 620], "size": 64}),
        ("image_coords_to_ras", {"view": "green", "point_1000": [999, 999]}),
        ("scroll", {"view": "red", "direction": "down", "num_slices": 7, "output": "final", "size": 64}),
        ("get_slice_offset_range", {"view": "yellow"}),
        ("fit", {"view": "all", "size": 96}),
        ("jump", {"ras": [10.0, -12.0, 8.0], "size": 64}),
        ("wl", {"window": 300, "level": 120, "size": 64}),
        ("window_preset", {"preset": "mr_t2_flair", "volume_name": "T2", "size": 64}),
        ("fusion", {"background_volume_ref": "T1", "foreground_volume_ref": "FLAIR", "foreground_opacity": 0.3}),
        ("set_layout", {"layout": "OneUpYellowSlice", "size": 64}),
        ("select_volume", {"volume_name": "T1c", "size": 64}),
        ("record_point", {"view": "red", "point_1000": [420, 510], "label": "p"}),
        ("record_key_slice", {"view": "yellow"}),
        ("open_case", {"spacing": 3.0, "size": 64}),
        ("scroll", {"view": "yellow", "num_slices": 3, "output": "final", "size": 64}),
        ("recover_standard_views", {"volume_name": "T2", "size": 64}),
        ("get_viewer_state", {}),
    ]
    sessions = {b: open_session(brain_case, viewer=backend_viewer(b)) for b in ("embedded", "slicer")}
    _close(sessions["embedded"].snapshot(), sessions["slicer"].snapshot(), "open")
    for name, args in script:
        out = {b: s.call(name, args) for b, s in sessions.items()}
        assert out["embedded"].ok and out["slicer"].ok, (name, out["embedded"].error, out["slicer"].error)
        _close(out["embedded"].result, out["slicer"].result, f"{name}.result")
        _close(out["embedded"].state, out["slicer"].state, f"{name}.state")


def test_the_slicer_viewer_implements_the_radiology_protocol() -> None:
    """Every method of RadiologyViewer, with the same parameters, so handlers run unchanged on it."""
    import inspect

    from copilot.slicer_backend.viewer import SlicerSceneViewer
    from copilot.viewer.protocol import RadiologyViewer

    for name, member in vars(RadiologyViewer).items():
        if name.startswith("_") or not callable(member):
            continue
        mine = getattr(SlicerSceneViewer, name)
        assert list(inspect.signature(mine).parameters) == list(inspect.signature(member).parameters), name
    assert isinstance(backend_viewer("slicer"), RadiologyViewer)


def test_the_viewer_attaches_to_a_bare_scene_without_an_application_logic() -> None:
    """As with `--no-main-window`: no layout, no slice logics; the viewer makes what it needs."""
    import slicer_core

    from copilot.slicer_backend import new_slicer_viewer
    from tests.conftest import make_volume

    scene = slicer_core.vtkMRMLScene()
    viewer = new_slicer_viewer(scene, None)
    vid = viewer.add_volume(make_volume(dims=(20, 20, 10), fill=5.0))
    viewer.recover_standard_views(vid)
    viewer.set_layout("one_up_green")
    assert viewer.layout_views() == ("green",) and viewer.slice_node("green").GetOrientation() == "Coronal"
    assert np.asarray(viewer.render("green", (64, 64))).shape == (64, 64)


def test_both_backends_give_the_3d_view_the_same_scene_data(brain_case: Path) -> None:
    """The active volume, its window/level and the segments reach a host's 3D view on either backend."""
    seg = {"volume": "FLAIR", "output_segment": "bright", "lower": 0.5, "upper": 1e6, "size": 64}
    data: dict[str, Any] = {}
    for b in ("embedded", "slicer"):
        session = open_session(brain_case, track="B", viewer=backend_viewer(b))
        assert session.call("select_volume", {"volume_name": "T2", "size": 64}).ok
        assert session.call("wl", {"window": 300, "level": 120, "size": 64}).ok
        assert session.call("segment_threshold", seg).ok
        data[b] = session.scene_data()
    emb, sl = data["embedded"], data["slicer"]
    assert emb is not None and sl is not None
    assert emb["volume"].name == sl["volume"].name == "T2"
    assert (emb["window"], emb["level"]) == pytest.approx((sl["window"], sl["level"])) == (300.0, 120.0)
    assert [s.name for s in emb["segments"]] == [s.name for s in sl["segments"]] == ["bright"]
    assert emb["segments"][0].voxels() == sl["segments"][0].voxels() > 0


def test_scene_data_is_empty_without_a_volume() -> None:
    """Nothing loaded: the 3D view gets an empty dict from either backend."""
    from copilot.engine.volume.viewer import EmbeddedVolumeViewer

    assert EmbeddedVolumeViewer().scene_data() == {}
    slicer = backend_viewer("slicer")
    assert slicer is not None and slicer.scene_data() == {}  # type: ignore[attr-defined]
