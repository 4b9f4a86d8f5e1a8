"""The MCP server: an `mcp` client session over stdio lists the handlers and gets the same results as HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path

import anyio

from copilot.runtime import open_session
from copilot.tools import RADIOLOGY
from tests.conftest import RunningServer

CALLS = [
    ("observe", {"view": "red", "size": 128}),
    ("set_slice_offset", {"view": "red", "offset": 8.0, "size": 96}),
    ("image_coords_to_ras", {"view": "red", "point_1000": [420, 380]}),
    ("set_slice_offset", {"view": "red", "offset": 1e6}),
]


async def _mcp_session(case: Path, trace: Path) -> tuple[list, list]:
    from mcp import ClientSession  # the client SDK is imported when the test runs, not at collection
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "copilot.cli", "mcp", "--case", str(case), "--trace-dir", str(trace)]
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        results = [await session.call_tool(name, args) for name, args in CALLS]
    return tools, results


def test_mcp_lists_tools_and_matches_http(brain_case: Path, tmp_path: Path) -> None:
    tools, results = anyio.run(_mcp_session, brain_case, tmp_path / "mcp_trace")
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {s.name for s in RADIOLOGY.specs("A")}  # track A: no analysis operators
    assert by_name["image_coords_to_ras"].input_schema == RADIOLOGY.get("image_coords_to_ras").parameters_schema()
    srv = RunningServer(open_session(brain_case))
    try:
        for (name, args), res in zip(CALLS, results, strict=True):
            http = srv.client.call(name, args)
            body = json.loads(res.content[0].text)
            assert res.is_error == (not http.ok)
            if http.ok:
                assert body["result"] == http.result and body["state"] == http.state, name
                mcp_hashes = [hashlib.sha256(base64.b64decode(c.data)).hexdigest() for c in res.content[1:]]
                assert mcp_hashes == [im["sha256"] for im in http.body["images"]], name
                assert all(c.mime_type == "image/png" for c in res.content[1:])
            else:
                assert body["error"]["code"] == http.error_code == "offset_out_of_range"
    finally:
        srv.stop()
    events = [json.loads(line) for line in (tmp_path / "mcp_trace" / "trace.jsonl").read_text().splitlines()]
    assert [e.get("handler") for e in events if e.get("actor") == "mcp"] == [n for n, _ in CALLS]
