"""The workstation's Qt-free parts: layouts, the raw-pixel screen path and its markers, evidence from answers,
opening studies (DICOM series, NIfTI, slides), recent studies, trace replay stepping and the VTK 3D scene."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from copilot.agent.policy import ScriptedPolicy
from copilot.cases.pack import load_case
from copilot.panel.answer_evidence import answer_evidence, evidence_label, focus_point
from copilot.panel.layout import arrange, default_layout, device_size, longitudinal_pair, panes
from copilot.panel.model import PanelModel
from copilot.panel.screen import Screen, screen_viewport
from copilot.panel.studies import (
    RecentStudies,
    StudyError,
    classify,
    dicom_series,
    open_study,
    study_for,
)
from copilot.panel.timeline import TraceTimeline
from copilot.runtime import open_session
from tests.workstation_data import dicom_two_series, nifti_file

BRAIN_ANSWER = """Findings: enhancing mass.
EVIDENCE:
KEY_SLICE_AXIAL_MM: 10
KEY_SLICE_SAGITTAL_MM: 20.0
KEY_SLICE_CORONAL_MM: -10
RAS: [20.0, -10.0, 10.0]
ANSWER: A"""


def test_layouts_fill_the_area() -> None:
    rects = arrange("three_up", 1200, 800, 3)
    assert [(r.x, r.w, r.h) for r in rects] == [(0, 398, 800), (400, 398, 800), (800, 398, 800)]
    quad = arrange("four_up", 1000, 800, 4)
    assert [(r.x, r.y) for r in quad] == [(0, 0), (501, 0), (0, 401), (501, 401)]
    assert all(r.w == 499 and r.h == 399 for r in quad)
    assert [r.h for r in arrange("three_up", 400, 1200, 3)] == [398, 398, 398]  # a tall area stacks them
    assert panes("four_up") == ["red", "3d", "yellow", "green"]
    assert panes("side_by_side", "red", ("v1", "v2")) == ["red:v1", "red:v2"]
    assert device_size(300, 200, 2.0) == (600, 400)
    assert default_layout("pathology", "breast_wsi", []) == "slide"
    assert default_layout("radiology", "lung_petct", ["CT"]) == "four_up"
    names = ["OLD_T1", "OLD_FLAIR", "CURRENT_T1", "CURRENT_FLAIR"]
    assert default_layout("radiology", "longitudinal_mri", names) == "side_by_side"
    assert longitudinal_pair(names) == ("OLD_T1", "CURRENT_T1")
    assert default_layout("radiology", "brain_mri", ["T1"]) == "three_up"


def test_answer_evidence_radiology_and_pathology() -> None:
    items = answer_evidence(BRAIN_ANSWER, "radiology")
    assert items[0] == {"kind": "point", "label": "answer RAS", "ras": [20.0, -10.0, 10.0], "source": "answer"}
    assert {(e["view"], e["offset_mm"]) for e in items[1:]} == {("red", 10.0), ("yellow", 20.0), ("green", -10.0)}
    assert focus_point(items) is items[0]
    assert answer_evidence("ANSWER: B", "radiology") == []
    slide = answer_evidence('{"wsi_label": "IC", "localizations": [{"x": 120, "y": 80.5}]}', "pathology")
    assert slide == [{"kind": "wsi_point", "label": "answer point 1", "point": {"x": 120.0, "y": 80.5},
                      "source": "answer"}]  # fmt: skip
    assert evidence_label(slide[0]) == "wsi_point: answer point 1 x 120, y 80 (answer)"
    assert evidence_label(items[1]).startswith("key_slice: answer key slice S 10.0")


def test_screen_renders_raw_pixels_at_any_size_and_maps_back(session) -> None:
    screen = Screen(session)
    frame = screen.frame("red", (640, 410))
    again = screen.frame("red", (640, 410))
    assert frame.pixels.shape == (410, 640, 3) and frame.pixels.dtype == np.uint8
    assert again.pixels is frame.pixels and screen.renders == 1  # unchanged scene: cached
    view = session._viewer.view("red")
    assert np.allclose(frame.to_ras(320, 205), view.image_to_ras(np.array([320.0, 205.0]), (640, 410)), atol=1e-6)
    assert np.allclose(frame.to_ras(320, 205), view.center, atol=view.pixel_mm((640, 410)))  # the middle
    # the same pixels the engine renders for that size (no resampling of a square render)
    expected = np.asarray(session._viewer.render("red", (640, 410), remember=False).convert("RGB"))
    assert np.array_equal(frame.pixels, expected)
    session.call("scroll", {"view": "red", "num_slices": 1, "output": "final", "size": 64}, actor="clinician")
    assert screen.frame("red", (640, 410)).pixels is not frame.pixels and screen.renders == 2
    assert screen.frame("yellow", (300, 300)) is not None and screen.renders == 3


def test_markers_project_evidence_and_key_slices(session) -> None:
    screen = Screen(session)
    session.call("jump", {"ras": [20.0, -10.0, 10.0], "size": 64})
    evidence = answer_evidence(BRAIN_ANSWER, "radiology")
    red = screen.frame("red", (500, 400), evidence, crosshair=[20.0, -10.0, 10.0], selected=0)
    yellow = screen.frame("yellow", (500, 400), evidence)
    point = next(m for m in red.markers if m.kind == "point")
    assert point.solid and point.coords == pytest.approx((250.0, 200.0), abs=1.0)  # centred by the jump
    assert np.allclose(red.to_ras(*point.coords), [20.0, -10.0, 10.0], atol=1e-6)
    assert any(m.kind == "cross" for m in red.markers)
    lines = [m for m in yellow.markers if m.kind == "line"]  # axial (S=10) and coronal (A=-10) key slices
    assert len(lines) == 2
    for m in lines:
        x0, y0, x1, y1 = m.coords
        ras0, ras1 = yellow.to_ras(x0, y0), yellow.to_ras(x1, y1)
        axis, value = (2, 10.0) if "S" in m.label else (1, -10.0)
        assert ras0[axis] == pytest.approx(value, abs=1e-6) and ras1[axis] == pytest.approx(value, abs=1e-6)


def test_slide_screen_viewport_fills_the_pane(tmp_path: Path) -> None:
    from copilot.medflow import make_cases

    case = make_cases("breast_wsi", 1, 2, tmp_path, slide_size=(1024, 768), mpp=2.0)[0]
    session = open_session(case)
    agent = session._viewer.viewport
    vp = screen_viewport(agent, (1200, 700))
    x0, y0, x1, y1 = agent.bounds()
    assert vp.screen_to_level0(600, 350) == pytest.approx((agent.cx, agent.cy))
    sx0, sy0 = vp.level0_to_screen(x0, y0)
    sx1, sy1 = vp.level0_to_screen(x1, y1)
    assert sx0 >= -1e-6 and sy0 >= -1e-6 and sx1 <= 1200 + 1e-6 and sy1 <= 700 + 1e-6  # the agent's field inside
    assert max(sx1 - sx0 - 1200, sy1 - sy0 - 700) == pytest.approx(0, abs=1e-6)  # and touching two sides
    ev = [{"kind": "wsi_point", "label": "p", "point": {"x": 300.0, "y": 200.0}}]
    frame = Screen(session).frame("viewer", (1200, 700), ev)
    assert frame.pixels.shape == (700, 1200, 3)
    pt = next(m for m in frame.markers if m.kind == "point")
    assert frame.to_level0(*pt.coords) == pytest.approx((300.0, 200.0))
    assert any(m.kind == "overview_point" for m in frame.markers)


def test_open_dicom_series_nifti_and_slide(tmp_path: Path) -> None:
    folder = dicom_two_series(tmp_path)
    assert classify(folder) == "dicom"
    series = dicom_series(folder)
    assert [(s.description, s.files, s.number) for s in series] == [("T1 axial", 12, 3), ("FLAIR axial", 10, 5)]
    with pytest.raises(StudyError, match="2 series"):
        study_for(folder)
    session = open_study(study_for(folder, series[1]))
    inv = session._viewer.inventory()
    assert [(v["name"], v["dimensions"], v["spacing_mm"]) for v in inv] == [("FLAIR axial", [32, 32, 10],
                                                                              [2.0, 2.0, 2.0])]  # fmt: skip
    nii = nifti_file(tmp_path)
    study = study_for(nii)
    assert (study.kind, study.inputs) == ("radiology", {"volumes": ["patient_t2.nii.gz"]})
    assert open_study(study)._viewer.inventory()[0]["dimensions"] == [30, 34, 20]
    from copilot.medflow import make_cases

    case = make_cases("breast_wsi", 1, 2, tmp_path / "cases", slide_size=(512, 384), mpp=2.0)[0]
    slide = next((case / "images").iterdir())
    study = study_for(slide)
    assert study.kind == "pathology" and open_study(study)._viewer.state()["dimensions"] == [512, 384]
    with pytest.raises(StudyError):
        classify(tmp_path / "notes.txt") if (tmp_path / "notes.txt").write_text("x") else None


def test_recent_studies(tmp_path: Path) -> None:
    recent = RecentStudies(tmp_path / "recent.json")
    a, b = tmp_path / "a.nii.gz", tmp_path / "b"
    a.write_bytes(b"")
    b.mkdir()
    recent.add(a)
    recent.add(b)
    recent.add(a)
    assert recent.items() == [a.resolve(), b.resolve()]
    b.rmdir()
    assert recent.items() == [a.resolve()]  # paths that went away are not offered


def test_trace_timeline_restores_each_scene(brain_case: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    session = open_session(brain_case, trace_dir=trace)
    script = tmp_path / "s.json"
    calls = [
        {"handler": "set_slice_offset", "args": {"view": "red", "offset": 10.0, "size": 96}},
        {"handler": "zoom", "args": {"view": "yellow", "factor": 2.0, "size": 96}},
        {"handler": "jump", "args": {"ras": [20.0, -10.0, 10.0], "size": 96}},
        {"handler": "record_point", "args": {"ras": [20.0, -10.0, 10.0], "label": "lesion"}},
    ]
    script.write_text(json.dumps({"calls": calls, "answer": BRAIN_ANSWER}))
    result = ScriptedPolicy(script).run(session, load_case(brain_case), 10)
    session.close({"status": result.status, "response": result.response})
    events = [json.loads(line) for line in (trace / "trace.jsonl").read_text().splitlines()]
    recorded_states = [e["state"] for e in events if e["type"] == "handler_call"]
    timeline = TraceTimeline(trace)
    assert timeline.verified and len(timeline.steps) == 5 and timeline.final["response"] == BRAIN_ANSWER
    for k in (1, 3, 0, 2):  # scrub back and forth
        timeline.seek(k)
        assert json.dumps(timeline.session.snapshot(), sort_keys=True) == json.dumps(recorded_states[k], sort_keys=True)
        recorded, again = timeline.rendered_hashes(k)
        assert recorded and recorded == again
    timeline.seek(4)
    assert timeline.session.evidence()[0]["label"] == "lesion"
    timeline.seek(0)
    assert timeline.session.evidence() == []


def test_model_moves_views_to_the_answer(brain_case: Path) -> None:
    session = open_session(brain_case)
    model = PanelModel(session, load_case(brain_case))
    model.take_answer(BRAIN_ANSWER)
    views = session._viewer.state()["views"]
    assert (views["yellow"]["offset"], views["green"]["offset"], views["red"]["offset"]) == (20.0, -10.0, 10.0)
    assert model.selected == 0 and len(model.evidence) == 4 and model.crosshair == [20.0, -10.0, 10.0]
    assert {e.actor for e in model.timeline} == {"system"}
    model.jump_to_evidence(2)  # the sagittal key slice
    assert session._viewer.view("yellow").offset == 20.0


def test_scene3d_renders_volume_and_segment(brain_case: Path) -> None:
    pytest.importorskip("vtk")
    from copilot.gui.scene3d import Scene3D
    from copilot.panel.screen import evidence_points_ras

    session = open_session(brain_case, track="B")
    out = session.call("segment_threshold", {"volume": "T1c", "output_segment": "bright", "lower": 600, "upper": 1e6})
    assert out.ok, out.error
    inputs = Screen(session).scene3d_inputs()
    assert inputs is not None and len(inputs["segments"]) == 1
    scene = Scene3D()
    scene.set_segments(inputs["segments"])
    empty = scene.render((160, 120))
    assert empty.shape == (120, 160, 3)
    colour = np.array(inputs["segments"][0].colour, dtype=float)
    seg_px = np.linalg.norm(empty.astype(float) - colour, axis=2) < 90
    assert seg_px.sum() > 50  # the surface is drawn in the segment's colour
    scene.set_volume(inputs["volume"], inputs["window"], inputs["level"])
    scene.set_points(evidence_points_ras([{"ras": list(inputs["volume"].center_ras())}], 0))
    scene.set_planes(inputs["planes"])
    full = scene.render((160, 120))
    assert not np.array_equal(full, empty) and full.std() > 10
    scene.rotate(90, 0)
    assert not np.array_equal(scene.render((160, 120)), full)
    scene.close()
