"""One replay: the chain reader in `copilot/trace/chain.py` names every kind of broken trace, pages of `GET /trace`
verify as the file does, and `medcopilot replay` and the desktop's timeline re-execute a trace through the same
`TraceReplay.calls` — same verdict on a recorded trace, the same words for a tampered one, and a trace recorded
before the replay core was written (`tests/recorded/brain_v1`) replays on both."""

from __future__ import annotations

import json
import shutil
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from copilot.cli import main
from copilot.panel.timeline import TraceTimeline
from copilot.panel.undo import UndoHistory
from copilot.replay import UNDO_EVENT, ReplaySetupError, TraceReplay, replay
from copilot.runtime import open_session
from copilot.session import Session
from copilot.trace.chain import (
    BrokenChain,
    ChainVerifier,
    EditedEvent,
    MissingTrace,
    NoEpisodeStart,
    NotJSON,
    TraceChainError,
    read_trace,
)
from copilot.trace.paging import read_page
from copilot.trace.recorder import ARTIFACTS, GENESIS, TRACE_FILE, TraceRecorder, canonical_json, event_hash

RECORDED = Path(__file__).parent / "recorded" / "brain_v1"  # recorded by the code before the replay core


def _record(session: Session) -> Path:
    """A trace with images, a refused call, a clinician's undo and evidence."""
    history = UndoHistory(session)
    session.call("scroll", {"view": "red", "num_slices": 2, "size": 64})
    session.call("set_slice_offset", {"view": "red", "offset": 1e6})  # refused, still recorded
    session.call("zoom", {"view": "green", "factor": 2.0, "center_1000": [300, 600], "size": 64})
    history.undo()
    session.call("record_point", {"view": "green", "point_1000": [420, 510], "label": "p"})
    session.close({"status": "done"})
    assert session.trace_dir is not None
    return session.trace_dir


@pytest.fixture
def trace(brain_case: Path, tmp_path: Path) -> Path:
    return _record(open_session(brain_case, trace_dir=tmp_path / "trace"))


def _lines(tdir: Path) -> list[bytes]:
    return (tdir / TRACE_FILE).read_bytes().split(b"\n")[:-1]


def _write(tdir: Path, lines: list[bytes]) -> None:
    (tdir / TRACE_FILE).write_bytes(b"".join(line + b"\n" for line in lines))


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# ----- the chain reader -----
def test_the_reader_names_each_kind_of_broken_chain(trace: Path, tmp_path: Path) -> None:
    events = read_trace(trace)
    assert [e["seq"] for e in events] == list(range(len(events))) and events[0]["type"] == "episode_start"
    lines = _lines(trace)
    with pytest.raises(MissingTrace, match=r"no trace\.jsonl"):
        read_trace(tmp_path)
    cases: list[tuple[list[bytes], type[TraceChainError], int, str]] = [
        ([*lines[:3], b"{not json", *lines[4:]], NotJSON, 3, "line 4 is not valid JSON"),
        ([*lines[:2], lines[2].replace(b'"seq":2', b'"seq": 2'), *lines[3:]], EditedEvent, 2, "canonical form"),
        ([*lines[:2], lines[2].replace(b'"red"', b'"yellow"', 1), *lines[3:]], EditedEvent, 2, "does not match"),
        ([*lines[:2], *lines[3:]], BrokenChain, 2, "has sequence number 3"),  # an event removed
        ([lines[1], *lines[2:]], BrokenChain, 0, "has sequence number 1"),  # the header removed
        ([b"[1, 2]", *lines[1:]], EditedEvent, 0, "event 0 is not in canonical form"),
    ]
    for n, (edited, error, seq, words) in enumerate(cases):
        copy = _copy(trace, tmp_path / f"c{n}")
        _write(copy, edited)
        with pytest.raises(error, match=words) as caught:
            read_trace(copy)
        assert caught.value.seq == seq and [e["seq"] for e in caught.value.events] == list(range(seq))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / TRACE_FILE).write_bytes(b"")
    with pytest.raises(NoEpisodeStart):
        read_trace(empty)
    note: dict[str, Any] = {"seq": 0, "type": "note", "time": 0, "prev": GENESIS}  # a whole chain, no header
    note["hash"] = event_hash(note)
    (tmp_path / "headless").mkdir()
    (tmp_path / "headless" / TRACE_FILE).write_text(canonical_json(note) + "\n", encoding="utf-8")
    with pytest.raises(NoEpisodeStart, match="does not begin with episode_start"):
        read_trace(tmp_path / "headless")


def test_pages_of_a_trace_verify_as_the_file_does_and_a_forged_page_is_refused(trace: Path) -> None:
    path = trace / TRACE_FILE
    chain, after, pages = ChainVerifier(), -1, 0
    while True:
        page = read_page(path, after, limit=3)
        chain.page(page["events"])
        pages, after = pages + 1, page["next_after"]
        if not page["more"]:
            break
    assert pages >= 3 and chain.events == read_trace(trace)
    first, second = read_page(path, -1, 3), read_page(path, 2, 3)
    skipped = ChainVerifier()
    skipped.page(first["events"])
    with pytest.raises(BrokenChain, match=r"event 3 \(.*\) has sequence number 6"):  # a page left out
        skipped.page(read_page(path, 5, 3)["events"])
    forged = ChainVerifier()
    forged.page(first["events"])
    events = [dict(e) for e in second["events"]]
    events[0]["actor"] = "clinician"
    with pytest.raises(EditedEvent, match="does not match its hash"):
        forged.page(events)


# ----- one re-execution -----
def test_the_timeline_and_medcopilot_replay_run_the_same_reexecution(
    trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []
    original = TraceReplay.calls

    def spy(self: TraceReplay) -> Any:
        runs.append(str(self.dir))
        return original(self)

    monkeypatch.setattr(TraceReplay, "calls", spy)
    report = replay(trace)
    timeline = TraceTimeline(trace)
    assert main(["replay", str(trace)]) == 0
    assert runs == [str(trace)] * 3
    assert report.ok and timeline.verified and report.calls == len(timeline.steps) == 5
    assert [s.handler for s in timeline.steps] == ["open_case", "scroll", "set_slice_offset", "zoom", "record_point"]
    assert all(s.problem is None for s in timeline.steps)
    assert timeline.session.evidence()[0]["label"] == "p" and timeline.final["status"] == "done"


def test_a_tampered_trace_is_refused_by_both_in_the_same_words(trace: Path, tmp_path: Path) -> None:
    lines = _lines(trace)
    edited = _copy(trace, tmp_path / "edited")
    _write(edited, [*lines[:2], lines[2].replace(b'"num_slices":2', b'"num_slices":3'), *lines[3:]])
    report = replay(edited)
    with pytest.raises(TraceChainError) as caught:
        TraceTimeline(edited)
    assert not report.ok and report.seq == caught.value.seq == 2 and report.divergence == caught.value.reason
    assert caught.value.reason == "event 2 (handler_call scroll): content does not match its hash (edited)"
    # an artifact changed after the session: the chain holds, the re-executed call differs, both say so
    art = _copy(trace, tmp_path / "art")
    png = sorted((art / "artifacts").glob("000002_*.png"))[0]
    png.write_bytes(png.read_bytes()[:-1] + b"\x00")
    report = replay(art)
    timeline = TraceTimeline(art)
    bad = [s for s in timeline.steps if not s.matches]
    assert not report.ok and not timeline.verified and [s.seq for s in bad] == [report.seq] == [2]
    assert report.divergence == f"event 2 (scroll): {bad[0].problem}"
    assert bad[0].problem == f"artifact artifacts/{png.name} is missing or was modified"
    # a header naming an encoder this version lacks: both refuse to rebuild the session, naming it
    broken = _rewrite_header(trace, {"png_encoder": "future-encoder"}, tmp_path / "enc")
    with pytest.raises(ReplaySetupError, match="cannot rebuild the session: unknown PNG encoder"):
        TraceTimeline(broken)
    assert "unknown PNG encoder 'future-encoder'" in replay(broken).summary()
    elsewhere = _rewrite_header(trace, {"backend": "qupath"}, tmp_path / "live")  # calls on a running application
    with pytest.raises(ReplaySetupError) as refused:
        TraceTimeline(elsewhere)
    assert replay(elsewhere).divergence == str(refused.value) and "'qupath' viewer" in str(refused.value)


def _rewrite_header(tdir: Path, changes: dict[str, Any], out: Path) -> Path:
    """The trace recorded again into `out` by the recorder with its header changed (a trace written by another
    version): a whole chain, the same calls and artifacts."""
    bookkeeping = ("seq", "type", "time", "prev", "hash")
    events = read_trace(tdir)
    head = {k: v for k, v in {**events[0], **changes}.items() if k not in (*bookkeeping, "format")}
    again = TraceRecorder(out, head)
    for e in events[1:]:
        if e["type"] != "episode_end":
            again.record(e["type"], {k: v for k, v in e.items() if k not in bookkeeping})
    again.close({k: v for k, v in events[-1].items() if k not in bookkeeping})
    shutil.copytree(tdir / ARTIFACTS, out / ARTIFACTS, dirs_exist_ok=True)
    return out


def test_a_trace_recorded_before_the_replay_core_replays_on_both(brain_case: Path, tmp_path: Path) -> None:
    """`tests/recorded/brain_v1` was written by the previous version (open_case, scroll, a refused offset, a zoom
    the clinician undid, a point, a coordinate conversion) on the conftest brain case."""
    old = _copy(RECORDED, tmp_path / "old")
    events = read_trace(old)
    assert events[0]["format"] == 1 and any(e["type"] == UNDO_EVENT for e in events)
    report = replay(old, brain_case)
    assert report.ok and report.calls == 6, report.summary()
    timeline = TraceTimeline(old, brain_case)
    assert timeline.verified and len(timeline.steps) == 6
    recorded = [e["state"] for e in events if e["type"] == "handler_call" and e["ok"]]
    timeline.seek(3)  # after the zoom the clinician later undid
    assert timeline.session.snapshot()["views"]["green"] == recorded[2]["views"]["green"]
    recorded_hashes, again = timeline.rendered_hashes(3)
    assert recorded_hashes and recorded_hashes == again
    assert main(["replay", str(old), "--case", str(brain_case)]) == 0


# ----- an adopted Slicer scene -----
@pytest.mark.slow
@pytest.mark.skipif(find_spec("slicer_core") is None, reason="needs slicer-core")
def test_the_timeline_replays_an_adopted_slicer_scene(tmp_path: Path) -> None:
    """A clinician's own scene adopted by the Slicer host: the timeline rebuilds it from `scene_adopted` through
    the same core as `medcopilot replay`, and scrubbing shows the recorded states on the rebuilt scene."""
    sitk = pytest.importorskip("SimpleITK")
    from copilot.host.slicer import SlicerHost
    from copilot.replay import ADOPTED_EVENT as REPLAYED
    from copilot.slicer_backend.adopt import ADOPTED_EVENT
    from copilot.slicer_backend.mrml import mrml
    from copilot.slicer_backend.scene import standalone_scene

    k, j, i = np.indices((16, 32, 32))
    data = (100 + 800 * (((i - 12) ** 2 + (j - 20) ** 2 + (k - 8) ** 2) <= 16)).astype(np.int16)
    image = sitk.GetImageFromArray(data)
    image.SetSpacing((1.0, 1.0, 2.0))
    sitk.WriteImage(image, str(tmp_path / "mine.nrrd"))
    s = standalone_scene()
    volumes = mrml().vtkSlicerVolumesLogic()
    volumes.SetMRMLScene(s.scene)
    node = volumes.AddArchetypeVolume(str(tmp_path / "mine.nrrd"), "mine")
    display = node.GetDisplayNode()
    display.SetAndObserveColorNodeID("vtkMRMLColorTableNodeGrey")  # what Slicer's volumes module gives a volume
    display.SetAutoWindowLevel(0)
    display.SetWindowLevel(500.0, 400.0)
    for logic in s.slice_logics.values():
        logic.GetSliceCompositeNode().SetBackgroundVolumeID(node.GetID())
        logic.FitSliceToAll()
    host = SlicerHost.adopt(s.scene, s.app_logic, tmp_path / "trace")
    session = host.session
    assert session.call("scroll", {"view": "red", "num_slices": 1, "size": 64}).ok
    assert session.call("zoom", {"view": "red", "factor": 2.0, "size": 64}).ok
    assert session.call("record_point", {"view": "red", "point_1000": [500, 500], "label": "mine"}).ok
    host.close()
    trace = tmp_path / "trace"
    events = read_trace(trace)
    assert REPLAYED == ADOPTED_EVENT in {e["type"] for e in events} and events[0]["backend"] == "slicer"
    report = replay(trace)
    timeline = TraceTimeline(trace)
    assert report.ok, report.summary()
    assert timeline.verified and len(timeline.steps) == report.calls == 3
    assert timeline.session.evidence()[0]["label"] == "mine"
    states = [e["state"] for e in events if e["type"] == "handler_call"]
    for n in (0, 2, 1):
        timeline.seek(n)
        assert json.dumps(timeline.session.snapshot(), sort_keys=True) == json.dumps(states[n], sort_keys=True)
