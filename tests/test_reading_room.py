"""The reading room's view-models: undo of the agent's and the clinician's changes (traced, replayed), a prior study
scrolled together with the current after an approved rigid registration, the model's text streamed into the panel,
tokens and cost per question and per session, the per-question rounds counter, approvals in words, evidence labels
that never overlap, and the clinician's ruler, zoom, pan, slice keys and window/level drag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import SimpleITK as sitk

from copilot.agent.policy import EpisodeResult
from copilot.panel.action_words import action_words
from copilot.panel.labels import place_labels
from copilot.panel.model import PanelModel
from copilot.panel.studies import open_study, study_for
from copilot.replay import UNDO_EVENT, replay
from tests.fake_openai import FakeOpenAI, tool


def phantom(path: Path, shift: tuple[int, int, int] = (0, 0, 0)) -> Path:
    """A 40×48×48 (2 mm) head-like phantom with three blobs of different brightness, shifted by `shift` voxels."""
    k, j, i = np.mgrid[0:40, 0:48, 0:48].astype(float)
    data = 400.0 * ((((i - 24) / 18) ** 2 + ((j - 24) / 20) ** 2 + ((k - 20) / 16) ** 2) <= 1)
    for (ci, cj, ck), r, v in (((16, 18, 14), 5, 500), ((30, 28, 22), 4, 900), ((22, 32, 26), 3, 700)):
        data += v * ((((i - ci) ** 2 + (j - cj) ** 2 + (k - ck) ** 2) ** 0.5) <= r)
    data = np.roll(data, shift=(shift[2], shift[1], shift[0]), axis=(0, 1, 2))
    image = sitk.GetImageFromArray(data.astype(np.float32))
    image.SetSpacing((2.0, 2.0, 2.0))
    image = sitk.SmoothingRecursiveGaussian(image, 1.5)
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path))
    return path


@pytest.fixture()
def panel(tmp_path: Path) -> Any:
    study = study_for(str(phantom(tmp_path / "now" / "head.nii.gz")))
    session = open_study(study, tmp_path / "trace")
    model = PanelModel(session, study, 20)
    yield model
    model.stop()
    session.close({"status": "test"})


class Calls:
    """An offline policy making the given calls as the agent, then answering."""

    name = "calls"

    def __init__(self, calls: list[tuple[str, dict[str, Any]]], answer: str = "done") -> None:
        self.calls, self.answer = calls, answer

    def run(self, session: Any, case: Any, budget: int) -> EpisodeResult:
        for name, args in self.calls:
            session.call(name, args, actor="agent")
        return EpisodeResult(self.answer, rounds=len(self.calls))


def _events(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (trace / "trace.jsonl").read_text().splitlines()]


def _frame(screen: Any) -> Any:
    """The red pane rendered at 200×200 (never None on a loaded study)."""
    frame = screen.frame("red", (200, 200))
    assert frame is not None
    return frame


def _offset(model: PanelModel, view: str = "red") -> float:
    return float(model.session.snapshot()["views"][view]["offset"])


# ----- undo -----
def test_undo_after_the_agents_set_slice_offset_restores_the_state_and_is_traced(panel: PanelModel,
                                                                                 tmp_path: Path) -> None:  # fmt: skip
    before = panel.session.snapshot()
    panel.run_episode(Calls([("set_slice_offset", {"view": "red", "offset": 10.0, "size": 64})]))
    assert panel.wait(10) and panel.status == "done"
    assert _offset(panel) == pytest.approx(10.0)
    step = panel.undo("agent")
    assert step.calls[0][:2] == ("set_slice_offset", "agent")
    after = panel.session.snapshot()
    assert after["views"] == before["views"] and after["evidence"] == before["evidence"]
    undo = [e for e in _events(tmp_path / "trace") if e["type"] == UNDO_EVENT]
    assert len(undo) == 1 and undo[0]["undone"][0]["handler"] == "set_slice_offset"
    assert undo[0]["undone"][0]["actor"] == "agent" and undo[0]["by"] == "clinician"
    assert panel.timeline[-1].handler == "undo"
    panel.scroll("red", 2)  # a call after the undo starts from the restored scene, and the trace still replays
    panel.session.close({"status": "test"})
    report = replay(tmp_path / "trace", tmp_path / "now")
    assert report.ok, report.summary()
    from copilot.panel.timeline import TraceTimeline

    assert TraceTimeline(tmp_path / "trace", tmp_path / "now").verified  # the desktop's replay rewinds there too


def test_undo_takes_back_the_clinicians_ruler_and_nothing_is_left_to_undo(panel: PanelModel) -> None:
    from copilot.panel.clinician_tools import ClinicianTools
    from copilot.panel.screen import Screen

    screen = Screen(panel.session)
    frame = _frame(screen)
    out = ClinicianTools(panel).ruler("red", frame, (50.0, 100.0), (150.0, 100.0))
    assert out.ok and len(panel.session.evidence()) == 1
    panel.undo()
    assert panel.session.evidence() == [] and panel.evidence == []
    with pytest.raises(IndexError):
        panel.undo()


# ----- the clinician's tools -----
def test_the_ruler_records_the_clinicians_distance_in_mm(panel: PanelModel) -> None:
    from copilot.panel.clinician_tools import ClinicianTools
    from copilot.panel.screen import Screen

    frame = _frame(Screen(panel.session))
    a, b = np.array(frame.to_ras(40.0, 60.0)), np.array(frame.to_ras(160.0, 140.0))
    ClinicianTools(panel).ruler("red", frame, (40.0, 60.0), (160.0, 140.0))
    [ev] = panel.session.evidence()
    assert ev["kind"] == "distance" and ev["distance_mm"] == pytest.approx(float(np.linalg.norm(a - b)), abs=0.01)
    calls = [e for e in _events(Path(str(panel.session.trace_dir))) if e.get("handler") == "measure_distance"]
    assert calls[-1]["actor"] == "clinician"


def test_slice_keys_scroll_and_home_end_reach_the_ends(panel: PanelModel) -> None:
    from copilot.panel.clinician_tools import ClinicianTools

    tools = ClinicianTools(panel)
    span = panel.act("get_slice_offset_range", {"view": "red"}).result
    start = _offset(panel)
    tools.key("red", "up")
    assert _offset(panel) == pytest.approx(start + span["step"])
    tools.key("red", "page_down")
    assert _offset(panel) == pytest.approx(start + span["step"] - 10 * span["step"])
    tools.key("red", "home")
    assert _offset(panel) == pytest.approx(span["min"])
    tools.key("red", "end")
    assert _offset(panel) == pytest.approx(span["max"])
    with pytest.raises(ValueError, match="unknown slice key"):
        tools.key("red", "f5")


def test_zoom_keeps_the_point_under_the_pointer_and_pan_follows_the_drag_as_one_undo(panel: PanelModel) -> None:
    from copilot.panel.clinician_tools import ClinicianTools
    from copilot.panel.screen import Screen

    screen, tools = Screen(panel.session), ClinicianTools(panel)
    frame = _frame(screen)
    under = np.array(frame.to_ras(60.0, 80.0))
    fov = panel.session.snapshot()["views"]["red"]["fov_mm"]
    assert tools.zoom_at("red", frame, (60.0, 80.0), 2.0).ok
    frame = _frame(screen)
    assert panel.session.snapshot()["views"]["red"]["fov_mm"][0] == pytest.approx(fov[0] / 2)
    assert np.allclose(frame.to_ras(60.0, 80.0), under, atol=0.6)  # within a pixel of the zoomed view
    grabbed = np.array(frame.to_ras(100.0, 100.0))
    steps = len(panel.history.steps)
    assert tools.pan("red", frame, (100.0, 100.0), (130.0, 90.0)).ok
    frame = _frame(screen)
    assert np.allclose(frame.to_ras(130.0, 90.0), grabbed, atol=0.6)  # the picture moved with the pointer
    assert len(panel.history.steps) == steps + 1  # two zooms, one undo step
    panel.undo()
    screen.sync()  # an undo is no call: the screen reads the restored scene
    assert np.allclose(_frame(screen).to_ras(100.0, 100.0), grabbed, atol=1e-6)


def test_window_level_by_right_drag(panel: PanelModel) -> None:
    from copilot.panel.clinician_tools import ClinicianTools

    st = panel.session.snapshot()
    d = st["display"][st["background_volume"]]
    ClinicianTools(panel).window_level_drag(100.0, 40.0)
    d2 = panel.session.snapshot()["display"][st["background_volume"]]
    assert d2["window"] == pytest.approx(d["window"] * 1.5, rel=1e-3)
    assert d2["level"] == pytest.approx(d["level"] - 0.2 * d["window"], rel=1e-3)


# ----- the prior -----
def test_a_prior_scrolls_together_after_an_approved_rigid_registration(panel: PanelModel, tmp_path: Path) -> None:
    from copilot.panel.prior import PriorComparison, focus_point

    shift = (3, -2, 2)  # voxels (i, j, k) of the prior's anatomy relative to the current's
    prior_study = study_for(str(phantom(tmp_path / "prior" / "head.nii.gz", shift)))
    prior = open_study(prior_study, tmp_path / "prior_trace")
    comparison = PriorComparison(panel.session, prior)
    try:
        vol = (panel.session.scene_data() or {})["volume"]
        expected = vol.ijk_to_ras[:3, :3] @ np.array(shift, dtype=float)  # the anatomy's move in RAS
        proposal = comparison.propose()
        assert np.allclose(proposal.matrix[:3, 3], expected, atol=0.5), proposal.words()
        panel.scroll("red", 3)  # before approval the prior stays where it is
        assert prior.snapshot()["views"] == open_study(prior_study).snapshot()["views"]
        comparison.approve()
        for view, slices in (("red", -5), ("yellow", 4), ("green", 2)):
            panel.scroll(view, slices)
            here, there = focus_point(panel.session), focus_point(prior)
            assert np.abs(there - (here + expected)).max() < 0.5  # the same anatomy in both, within 0.5 mm
        panel.jump(list(focus_point(panel.session) + np.array([6.0, -4.0, 2.0])))
        assert np.abs(focus_point(prior) - (focus_point(panel.session) + expected)).max() < 0.5
    finally:
        comparison.close()
    current = [e["type"] for e in _events(tmp_path / "trace")]
    assert "prior_registration_proposed" in current and "prior_registration_approved" in current
    followed = [e for e in _events(tmp_path / "prior_trace") if e["type"] == "handler_call"][1:]
    assert followed and all(e["actor"] == "system" for e in followed)


# ----- the conversation -----
def test_streamed_text_reaches_the_panel_in_pieces_before_the_round_ends(panel: PanelModel) -> None:
    from copilot.study.policies import conversation, model_settings

    answer = "A bright round focus lies in the left posterior region of the phantom near the midline. ANSWER: A"
    fake = FakeOpenAI([{"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": 4.0})]},
                       {"content": answer, "chunks": 5}])  # fmt: skip
    seen: list[tuple[str, str, str]] = []
    panel.listeners.append(lambda what: seen.append((what, panel.streamed, panel.status)))
    try:
        settings = model_settings("openai:scripted-model", base_url=fake.base_url,
                                  prices={"openai:scripted-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}})
        panel.run_episode(conversation(settings, panel.case, panel.session.kind), "Is there a focus?")
        assert panel.wait(30) and panel.status == "done", panel.messages
        first = panel.usage
        panel.run_episode(panel.policy, "Anything else?")
        assert panel.wait(30) and panel.status == "done", panel.messages
    finally:
        fake.stop()
    pieces = [text for what, text, status in seen if what == "stream" and status == "running"]
    assert len(pieces) >= 3 and pieces[0] != pieces[-1] and answer.startswith(pieces[0])
    assert any(len(p) < len(answer) for p in pieces)  # text shown before the whole answer was there
    assert first is not None and first["input_tokens"] > 0 and first["cost_usd"] is not None
    assert panel.session_usage is not None and panel.usage is not None
    assert panel.session_usage["input_tokens"] == first["input_tokens"] + panel.usage["input_tokens"]
    text = panel.usage_text()
    assert "this question:" in text and "session:" in text and "$" in text


def test_the_rounds_counter_counts_per_question(panel: PanelModel) -> None:
    moves = [("scroll", {"view": "red", "direction": "up", "num_slices": 1, "output": "final", "size": 64})] * 7
    panel.run_episode(Calls(moves))
    assert panel.wait(10) and panel.rounds_used == 7
    panel.run_episode(Calls(moves[:1]))
    assert panel.wait(10)
    assert panel.rounds_used == 1 and panel.rounds_total == 8


def test_an_approval_says_every_argument_in_words() -> None:
    assert action_words("set_slice_offset", {"view": "red", "offset": -12.5, "size": 128}) == \
        "set red slice to S −12.5 mm"  # fmt: skip
    assert action_words("scroll", {"view": "green", "direction": "down", "num_slices": 3}) == \
        "scroll green down by 3 slices"  # fmt: skip
    assert action_words("jump", {"ras": [10, -4, 22.5]}) == "centre every view on R 10 mm, A −4 mm, S 22.5 mm"
    assert action_words("fusion", {"background_volume_ref": "CT", "foreground_volume_ref": "PET",
                                   "foreground_opacity": 0.4}) == "show PET over CT at 40 % opacity"  # fmt: skip
    assert action_words("segment_threshold", {"volume": "CT", "lower": 100}) == \
        "segment threshold: volume = CT, lower = 100"  # fmt: skip


def test_labels_of_five_nearby_findings_never_overlap() -> None:
    points = [(100.0, 100.0), (108.0, 104.0), (96.0, 112.0), (112.0, 92.0), (104.0, 98.0)]
    texts = ["hyperintense focus", "rim", "oedema edge", "lesion centre", "necrotic core"]
    boxes = place_labels(points, texts, 300.0, 300.0)
    assert all(b is not None for b in boxes)
    for n, a in enumerate(boxes):
        assert a is not None and a.inside(300.0, 300.0)
        for b in boxes[n + 1 :]:
            assert b is not None and not a.overlaps(b)
        for px, py in points:  # nor over any finding's ring
            assert not (a.x - 9 < px < a.x + a.w + 9 and a.y - 9 < py < a.y + a.h + 9)


def test_the_panel_keeps_another_listener_of_the_stream(panel: PanelModel) -> None:
    """A terminal that listens to the model's text keeps receiving it, question after question."""

    class Streams:
        name = "streams"

        def __init__(self) -> None:
            self.on_stream: Any = None

        def run(self, session: Any, case: Any, budget: int) -> EpisodeResult:
            for piece in ("one ", "two ", "three"):
                self.on_stream(piece)
            return EpisodeResult("one two three")

    heard: list[str] = []
    policy = Streams()
    policy.on_stream = heard.append
    for _ in range(2):
        panel.run_episode(policy, "again?")
        assert panel.wait(5)
    assert heard == ["one ", "two ", "three"] * 2 and panel.stream_pieces == 3


def test_labels_keep_clear_of_labels_drawn_elsewhere() -> None:
    from copilot.panel.labels import Box

    key_slice = Box(6.0, 88.0, 120.0, 13.0)  # a key-slice line's label, where the pane writes it
    [box] = place_labels([(60.0, 100.0)], ["focus"], 300.0, 300.0, fixed=[key_slice])
    assert box is not None and not box.overlaps(key_slice)


def test_a_ct_priors_window_follows_the_current_and_an_mr_keeps_its_own(tmp_path: Path) -> None:
    """Two CTs: after approval the prior shows the current's window (system calls in its trace), and every later
    change of the current's window too, until the link is turned off. Two MRs: the prior keeps its own window."""
    from copilot.panel.prior import PriorComparison

    for name, linked in (("ct_head.nii.gz", True), ("head.nii.gz", False)):
        now = open_study(study_for(str(phantom(tmp_path / name / "now" / name))), tmp_path / name / "t")
        prior = open_study(study_for(str(phantom(tmp_path / name / "prior" / name, (2, 0, 1)))),
                           tmp_path / name / "p")  # fmt: skip
        comparison = PriorComparison(now, prior)
        try:
            own = (prior.scene_data() or {})["window"]
            comparison.propose()
            comparison.approve()
            assert now.call("wl", {"window": 80.0, "level": 40.0}, actor="clinician").ok
            shown = prior.scene_data() or {}
            assert ((shown["window"], shown["level"]) == (80.0, 40.0)) is linked
            assert linked or shown["window"] == own
            comparison.link_window = False
            assert now.call("wl", {"window": 1500.0, "level": -600.0}, actor="clinician").ok
            assert (prior.scene_data() or {})["window"] == (80.0 if linked else own)
        finally:
            comparison.close()
            now.close({"status": "test"})
