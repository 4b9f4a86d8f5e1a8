"""The MCP server answers every malformed request that carries an id (with that id when it can be recovered,
`null` otherwise), keeps serving afterwards, and writes no traceback to stdout or stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue

import pytest

from copilot.server.mcp_guard import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, screen

HEAD = b'{"jsonrpc":"2.0",'
BIG = b"9" * 5000
DEEP = b"[" * 10000 + b"]" * 10000
MALFORMED: list[tuple[str, bytes, object, int]] = [  # (what, line, expected id, expected code)
    ("lone surrogate", HEAD + b'"id":11,"method":"ping","params":{"x":"\\ud800"}}', 11, PARSE_ERROR),
    ("5000-digit integer in params", HEAD + b'"id":12,"method":"ping","params":{"n":' + BIG + b"}}", 12, PARSE_ERROR),
    ("5000-digit integer as id", HEAD + b'"id":' + BIG + b',"method":"ping"}', None, PARSE_ERROR),
    (
        "deep nesting",
        HEAD + b'"id":14,"method":"ping","params":{"a":' + DEEP + b"}}",
        14,
        PARSE_ERROR,
    ),
    ("truncated line", HEAD + b'"id":15,"method":"tools/list","par', 15, PARSE_ERROR),
    ("params: []", HEAD + b'"id":16,"method":"tools/list","params":[]}', 16, INVALID_PARAMS),
    ("params: [] with a string id", HEAD + b'"id":"abc","method":"ping","params":[]}', "abc", INVALID_PARAMS),
    ("boolean id", HEAD + b'"id":true,"method":"ping"}', None, INVALID_REQUEST),
    ("batch", b"[]", None, INVALID_REQUEST),
    ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":19,"method":"ping"}', 19, INVALID_REQUEST),
    ("bytes that are not UTF-8", HEAD + b'"id":20,"method":"ping","params":{"x":"\xff"}}', 20, PARSE_ERROR),
    ("method that is a number", HEAD + b'"id":22,"method":7}', 22, INVALID_REQUEST),
    ("unknown MCP method shape", HEAD + b'"id":23,"method":"tools/call","params":{"name":5}}', 23, None),
]


@pytest.mark.parametrize(("what", "line", "mid", "code"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_screen_answers_with_the_id(what: str, line: bytes, mid: object, code: int | None) -> None:
    passed, error = screen(line)
    if code is None:
        assert passed is not None and error is None  # valid JSON-RPC: the MCP session answers it
        return
    assert passed is None and error is not None
    body = json.loads(error)
    assert body["jsonrpc"] == "2.0" and body["id"] == mid and body["error"]["code"] == code, what


def test_invalid_notifications_get_no_reply() -> None:
    assert screen(b'{"jsonrpc":"2.0","method":"notifications/x","params":[]}') == (None, None)
    assert screen(b"   \n") == (None, None)


def _reader(stream, out: Queue) -> None:  # type: ignore[no-untyped-def]
    for line in iter(stream.readline, b""):
        out.put(line)
    out.put(None)


def test_mcp_process_answers_every_malformed_request(brain_case: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "copilot.cli", "mcp", "--case", str(brain_case), "--trace-dir", str(tmp_path / "t")]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    replies: Queue = Queue()
    threading.Thread(target=_reader, args=(proc.stdout, replies), daemon=True).start()
    stderr: list[bytes] = []
    threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True).start()  # type: ignore[arg-type]
    assert proc.stdin is not None
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).encode()]
    lines.append(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    lines += [line for _, line, _, _ in MALFORMED]
    lines.append(b'{"jsonrpc":"2.0","id":99,"method":"ping"}')
    try:
        for line in lines:
            proc.stdin.write(line + b"\n")
            proc.stdin.flush()
        got: list[dict] = []
        deadline = time.monotonic() + 60
        while not any(r.get("id") == 99 for r in got) and time.monotonic() < deadline:
            try:
                item = replies.get(timeout=max(0.1, deadline - time.monotonic()))
            except Empty:
                break
            if item is None:
                break
            got.append(json.loads(item))
    finally:
        proc.stdin.close()
        proc.wait(30)
    by_id = {json.dumps(r.get("id")): r for r in got if r.get("id") is not None}
    for what, _, mid, code in MALFORMED:
        if mid is None:
            continue
        assert json.dumps(mid) in by_id, what
        if code is not None:
            assert by_id[json.dumps(mid)]["error"]["code"] == code, what
    nulls = [r for r in got if r.get("id") is None]
    assert len(nulls) == sum(1 for m in MALFORMED if m[2] is None)
    assert by_id["99"].get("result") == {}  # still serving after all of them
    assert by_id["23"].get("error") or by_id["23"].get("result", {}).get("isError")
    text = b"".join(stderr).decode("utf-8", "replace")
    assert "Traceback" not in text, text[-2000:]
