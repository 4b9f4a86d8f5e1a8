"""Concurrent clients are serialised consistently; traces record the applied order and replay exactly;
an edited trace is detected and the event named."""

from __future__ import annotations

import random
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from copilot.cli import main
from copilot.replay import read_events, replay
from copilot.session import Session
from tests.conftest import RunningServer


def _burst(server: RunningServer, n: int = 50, threads: int = 6) -> list[tuple[dict, object]]:
    rng = server.client.call("get_slice_offset_range", {"view": "red"}).result
    offsets = [rng["min"] + (rng["max"] - rng["min"]) * i / (n - 1) for i in range(n)]
    calls: list[dict] = []
    for i, off in enumerate(offsets):
        if i % 5 == 4:
            calls.append({"handler": "get_viewer_state", "args": {"include_volumes": False}})
        elif i % 7 == 3:
            calls.append({"handler": "observe", "args": {"view": "red", "size": 64}})
        else:
            calls.append({"handler": "set_slice_offset", "args": {"view": "red", "offset": off, "size": 64}})
    with ThreadPoolExecutor(threads) as pool:
        replies = list(pool.map(lambda c: server.client.call(c["handler"], c["args"]), calls))
    return list(zip(calls, replies, strict=True))


def test_fifty_concurrent_calls_are_consistent_and_traced_in_order(server: RunningServer, tmp_path: Path) -> None:
    results = _burst(server)
    assert all(r.ok for _, r in results)
    for call, reply in results:
        if call["handler"] == "set_slice_offset":  # each caller sees the state its own call produced
            assert abs(reply.state["views"]["red"]["offset"] - call["args"]["offset"]) < 1e-6
    events = [e for e in server.client.trace() if e["type"] == "handler_call" and e["actor"] == "http"]
    assert len(events) == 51  # the range query + 50
    current = None
    for ev in events:  # the trace order is the order the calls were applied
        if ev["handler"] == "set_slice_offset":
            current = ev["args"]["offset"]
        if current is not None:
            assert abs(ev["state"]["views"]["red"]["offset"] - current) < 1e-6
    server.session.close()
    report = replay(server.session.trace_dir)
    assert report.ok, report.summary()
    assert report.calls == 52


def _write_trace(session: Session) -> Path:
    session.call("scroll", {"view": "red", "num_slices": 3, "size": 96})
    session.call("set_slice_offset", {"view": "red", "offset": 1e6})  # refused, still recorded
    session.call("zoom", {"view": "green", "factor": 2.0, "center_1000": [300, 600], "size": 96})
    session.call("image_coords_to_ras", {"view": "green", "point_1000": [420, 510]})
    session.call("record_point", {"view": "green", "point_1000": [420, 510], "label": "p"})
    session.call("fusion", {"background_volume_ref": "T1", "foreground_volume_ref": "FLAIR", "size": 96})
    session.close({"status": "done"})
    return session.trace_dir


def test_replay_reproduces_the_trace(traced_session: Session) -> None:
    tdir = _write_trace(traced_session)
    assert main(["replay", str(tdir)]) == 0
    events, failure = read_events(tdir)
    assert failure is None
    refused = [e for e in events if e["type"] == "handler_call" and not e["ok"]]
    assert refused[0]["error"]["code"] == "offset_out_of_range"


def test_one_edited_byte_fails_replay_naming_the_event(traced_session: Session, tmp_path: Path) -> None:
    tdir = _write_trace(traced_session)
    raw = (tdir / "trace.jsonl").read_bytes()
    line_starts = [0, *[i + 1 for i, b in enumerate(raw) if b == ord("\n")][:-1]]
    rnd = random.Random(1234)
    for trial in range(25):
        pos = rnd.randrange(len(raw) - 1)
        event = max(n for n, s in enumerate(line_starts) if s <= pos)
        new = rnd.choice([b for b in b"0123456789abcdefxyz:,{} " if b != raw[pos]])
        copy = tmp_path / f"edited{trial}"
        shutil.copytree(tdir, copy)
        (copy / "trace.jsonl").write_bytes(raw[:pos] + bytes([new]) + raw[pos + 1 :])
        report = replay(copy)
        assert not report.ok
        assert report.seq == event, (pos, report.summary())
        assert f"event {event}" in report.summary()
        assert main(["replay", str(copy)]) == 1


def test_modified_artifact_or_different_render_fails(traced_session: Session, tmp_path: Path) -> None:
    tdir = _write_trace(traced_session)
    copy = tmp_path / "art"
    shutil.copytree(tdir, copy)
    art = sorted((copy / "artifacts").glob("*.png"))[2]
    art.write_bytes(art.read_bytes()[:-1] + b"\x00")
    report = replay(copy)
    assert not report.ok and "artifact" in report.divergence
