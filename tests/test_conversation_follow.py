"""A conversation the clinician can follow: rounds counted as the model's turns (several calls in one turn are one
round), a follow-up's own evidence printed by `chat`, a streamed answer printed once, an answer's restatement of a
recorded point listed and drawn once, distances named with their length in mm, and the clinician's repeated steps
folded into one row of the Actions list while every agent call keeps its own."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import SimpleITK as sitk

from copilot.panel.action_rows import action_rows
from copilot.panel.model import PanelModel, TimelineEntry
from copilot.panel.restated import unrestated
from copilot.panel.screen import Screen
from copilot.panel.studies import open_study, study_for
from copilot.study.chat import Terminal, run_chat
from copilot.study.policies import conversation, model_settings
from tests.fake_openai import FakeOpenAI, tool


@pytest.fixture(scope="module")
def volume(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 24×40×40 (2 mm) volume with a bright cube in the middle."""
    data = np.zeros((24, 40, 40), dtype=np.float32)
    data[8:16, 14:26, 14:26] = 800.0
    image = sitk.GetImageFromArray(data)
    image.SetSpacing((2.0, 2.0, 2.0))
    path = tmp_path_factory.mktemp("study") / "cube.nii.gz"
    sitk.WriteImage(image, str(path))
    return path


@pytest.fixture()
def panel(volume: Path, tmp_path: Path) -> Any:
    study = study_for(str(volume))
    session = open_study(study, tmp_path / "trace")
    model = PanelModel(session, study, 20)
    yield model
    model.stop()
    session.close({"status": "test"})


def centre(model: PanelModel) -> list[float]:
    """The RAS centre of the volume (where the cube is)."""
    return [round(float(v), 1) for v in model.session.snapshot()["views"]["red"]["center_ras"]]


def scroll(view: str) -> dict[str, Any]:
    return tool("scroll", {"view": view, "direction": "up", "num_slices": 1, "output": "final", "size": 64})


def run(panel: PanelModel, policy: Any, question: str) -> None:
    panel.run_episode(policy, question)
    assert panel.wait(30) and panel.status == "done", panel.messages


def test_three_rounds_of_several_calls_are_three_rounds(panel: PanelModel) -> None:
    rounds = [{"tool_calls": [scroll("red"), scroll("yellow"), scroll("green")]},
              {"tool_calls": [scroll("red"), scroll("red")]},
              {"tool_calls": [scroll("green"), scroll("yellow")]},
              {"content": "Nothing else."},
              {"tool_calls": [scroll("red"), scroll("red")]},
              {"content": "Still nothing."}]  # fmt: skip
    fake = FakeOpenAI(rounds)
    seen: list[int] = []
    panel.listeners.append(lambda what: seen.append(panel.rounds_used))
    try:
        policy = conversation(model_settings("openai:scripted", base_url=fake.base_url), panel.case, panel.session.kind)
        run(panel, policy, "Is there anything?")
        assert panel.rounds_used == 3 and len([e for e in panel.timeline if e.actor == "agent"]) == 7
        assert max(seen) == 3  # the bar never read the calls
        run(panel, panel.policy, "And now?")
        assert panel.rounds_used == 1 and panel.rounds_total == 4
    finally:
        fake.stop()


def test_a_restated_point_is_listed_and_drawn_once_and_a_distance_says_mm(panel: PanelModel) -> None:
    r, a, s = centre(panel)
    first = (f"A bright cube.\nEVIDENCE:\nRAS: [{r + 0.04}, {a - 0.03}, {s}] cube centre\n"
             f"DISTANCE_MM: [{r - 12}, {a}, {s}] -> [{r + 12}, {a}, {s}] width")  # fmt: skip
    follow = f"The same cube, 24 mm wide.\nEVIDENCE:\nRAS: [{r}, {a}, {s}] cube centre"
    fake = FakeOpenAI([{"tool_calls": [tool("record_point", {"ras": [r, a, s], "label": "cube"})]},
                       {"content": first}, {"content": follow}])  # fmt: skip
    try:
        policy = conversation(model_settings("openai:scripted", base_url=fake.base_url), panel.case, panel.session.kind)
        run(panel, policy, "Where is it?")
        kinds = [e["kind"] for e in panel.evidence]
        assert kinds == ["point", "distance"]  # the answer's point is the recorded one, listed once
        assert [e["kind"] for e in panel.last_answer_items] == ["point", "distance"]
        run(panel, panel.policy, "How wide?")
        assert [e["kind"] for e in panel.last_answer_items] == ["point"]  # the follow-up's own evidence
        assert [e["kind"] for e in panel.evidence] == ["point", "distance"]
        frame = Screen(panel.session).frame("red", (256, 256), panel.evidence)
    finally:
        fake.stop()
    assert frame is not None
    points = [m for m in frame.markers if m.kind == "point"]
    assert len(points) == 3  # one ring at the cube, two distance ends
    labels = sorted(m.label for m in points)
    assert labels == ["", "cube", "width 24.0 mm"]  # a distance named once, with its length
    assert {m.end for m in points if m.index == 1} == {"a", "b"}


def test_unrestated_keeps_points_further_apart_than_a_millimetre() -> None:
    near = {"kind": "point", "ras": [10.0, 0.0, 0.0]}
    far = {"kind": "point", "ras": [11.5, 0.0, 0.0]}
    recorded = [{"kind": "measurement", "ras": [10.3, 0.2, 0.0]}]
    assert unrestated([near, far], recorded) == [far]
    key = {"kind": "key_slice", "view": "red", "offset_mm": 4.0}
    assert unrestated([key], [{"kind": "key_slice", "view": "green", "offset_mm": 4.0}]) == [key]
    assert unrestated([key, dict(key, offset_mm=4.2)]) == [key]


def test_the_clinicians_repeated_steps_are_one_row() -> None:
    def entry(handler: str, actor: str, status: str = "ok") -> TimelineEntry:
        return TimelineEntry(handler, {}, actor, status)

    timeline = [entry("scroll", "agent"), entry("scroll", "agent"), *[entry("scroll", "clinician")] * 12,
                entry("wl", "clinician"), entry("wl", "clinician"), entry("jump", "agent"),
                entry("scroll", "clinician", "refused"), entry("scroll", "clinician")]  # fmt: skip
    texts = [row.text() for row in action_rows(timeline)]
    assert texts == ["1. [agent] scroll — ok", "2. [agent] scroll — ok", "3–14. [clinician] scroll ×12 — ok",
                     "15–16. [clinician] wl ×2 — ok", "17. [agent] jump — ok", "18. [clinician] scroll — refused",
                     "19. [clinician] scroll — ok"]  # fmt: skip


def test_chat_prints_a_streamed_answer_once_and_each_follow_ups_evidence(
    volume: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    import argparse

    probe = open_study(study_for(str(volume)))
    r, a, s = [round(float(v), 1) for v in probe.snapshot()["views"]["red"]["center_ras"]]
    probe.close()
    first = f"A bright cube in the middle.\nEVIDENCE:\nRAS: [{r}, {a}, {s}] cube centre"
    follow = f"About 24 mm wide.\nEVIDENCE:\nRAS: [{r}, {a}, {s}] cube centre\nKEY_SLICE_AXIAL_MM: {s}"
    fake = FakeOpenAI([{"tool_calls": [scroll("red")]}, {"content": first, "chunks": 4},
                       {"content": follow, "chunks": 3}])  # fmt: skip
    monkeypatch.setattr("sys.stdin", io.StringIO("Where is it?\nHow wide?\n/quit\n"))
    out, err = io.StringIO(), io.StringIO()
    ns = argparse.Namespace(study=str(volume), series=None, ask=[], policy="openai", model="scripted",
                            base_url=fake.base_url, trace_dir=str(tmp_path / "trace"), approve=False, track="A",
                            budget=20)  # fmt: skip
    try:
        assert run_chat(ns, Terminal(out, err)) == 0
    finally:
        fake.stop()
    text = out.getvalue()
    assert text.count("A bright cube in the middle.") == 1 and text.count("About 24 mm wide.") == 1
    assert "answer:" not in text  # streamed as it came, not again
    tail = text.split("About 24 mm wide.")[1]
    assert "evidence: point: cube centre" in tail and "evidence: key_slice: answer key slice S" in tail
