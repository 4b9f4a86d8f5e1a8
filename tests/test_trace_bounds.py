"""Traces stay bounded under abuse: refused calls are traced with their arguments cut to a documented size plus
their hash (in process, over MCP), and `GET /trace` answers a page at a time."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue
from typing import Any

from copilot.replay import replay
from copilot.runtime import open_session
from copilot.trace.recorder import ARGS_TRACE_BYTES, TRACE_FILE, canonical_json
from tests.conftest import RunningServer

MIB = 1024 * 1024


def test_a_hundred_refused_megabyte_calls_grow_the_trace_by_under_a_megabyte(brain_case: Path, tmp_path: Path) -> None:
    session = open_session(brain_case, trace_dir=tmp_path / "t")
    before = (tmp_path / "t" / TRACE_FILE).stat().st_size
    big = "x" * MIB
    cases: list[tuple[str, dict[str, Any]]] = [
        ("set_slice_offset", {"view": "red", "offset": big}),  # wrong type: invalid arguments
        ("no_such_handler", {"blob": big}),  # unknown handler
        ("record_point", {"ras": [0, 0, 0], "label": big, "password": "hunter2-" + big}),
    ]
    for n in range(100):
        name, args = cases[n % 3]
        out = session.call(name, args, actor="mcp" if n % 2 else "agent")
        assert not out.ok
    session.close()
    text = (tmp_path / "t" / TRACE_FILE).read_text()
    assert len(text.encode()) - before < MIB
    calls = [json.loads(line) for line in text.splitlines() if '"handler_call"' in line]
    refused = [e for e in calls if e["actor"] != "system"]  # after the case's own open_case
    assert len(refused) == 100 and all(e["args_truncated"] and not e["ok"] for e in refused)
    first = refused[0]
    whole = canonical_json({"view": "red", "offset": big}).encode()
    assert first["args"]["bytes"] == len(whole) and first["args"]["sha256"] == hashlib.sha256(whole).hexdigest()
    assert len(first["args"]["head"].encode()) <= ARGS_TRACE_BYTES
    assert "hunter2" not in text  # secrets are redacted before the arguments are cut
    assert replay(tmp_path / "t").ok  # refused calls recorded by hash are not run again


def test_refused_mcp_calls_are_traced_bounded(brain_case: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "copilot.cli", "mcp", "--case", str(brain_case), "--trace-dir", str(tmp_path / "t")]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    replies: Queue = Queue()
    out = proc.stdout
    assert out is not None

    def read() -> None:
        for line in iter(out.readline, b""):
            replies.put(line)

    threading.Thread(target=read, daemon=True).start()
    assert proc.stdin is not None
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    lines = [json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}),
             '{"jsonrpc":"2.0","method":"notifications/initialized"}']  # fmt: skip
    calls = 5
    for n in range(1, calls + 1):
        params = {"name": "set_slice_offset", "arguments": {"view": "red", "offset": "y" * MIB}}
        lines.append(json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}))
    try:
        for line in lines:
            proc.stdin.write(line.encode() + b"\n")
            proc.stdin.flush()
        answered: set[int] = set()
        deadline = time.monotonic() + 60
        while len(answered) < calls + 1 and time.monotonic() < deadline:
            try:
                answered.add(json.loads(replies.get(timeout=1)).get("id"))
            except Empty:
                continue
    finally:
        proc.stdin.close()
        proc.wait(30)
    assert answered >= set(range(calls + 1))
    size = (tmp_path / "t" / TRACE_FILE).stat().st_size
    events = [json.loads(x) for x in (tmp_path / "t" / TRACE_FILE).read_text().splitlines()]
    assert sum(1 for e in events if e["type"] == "handler_call" and e.get("args_truncated")) == calls
    assert size < calls * 8 * 1024 + 64 * 1024  # megabytes sent, a few kilobytes each kept


def test_get_trace_answers_a_page_at_a_time(server: RunningServer) -> None:
    for _ in range(1200):
        server.session.call("no_such_handler", {"n": 1}, actor="http")
    client = server.client
    first = client.request("GET", "/medcopilot/v1/trace").body
    assert len(first["events"]) == 500 and first["more"] and first["next_after"] == 499
    page = client.request("GET", "/medcopilot/v1/trace?after=499&limit=10").body
    assert [e["seq"] for e in page["events"]] == list(range(500, 510)) and page["more"]
    every = client.trace()  # follows the pages
    assert [e["seq"] for e in every] == list(range(len(every))) and len(every) >= 1201
    assert every == server.session.trace_events()
    for bad in ("limit=0", "limit=100000", "after=x"):
        reply = client.request("GET", f"/medcopilot/v1/trace?{bad}")
        assert reply.status == 400 and reply.body["error"]["code"] == "invalid_query"
