"""MCP over streamable HTTP (`medcopilot mcp --http`): an `mcp` SDK client lists annotated tools and calls `observe`
with the token; without it, or from a rebound Host or a foreign Origin, the server refuses before the SDK sees the
request. Results keep their images within the clients' size limits."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from copilot.cli import main
from copilot.server.mcp_content import MAX_IMAGE_SIDE, content, png_size, tool
from copilot.tools import RADIOLOGY
from copilot.trace.outcome import CallOutcome, EncodedImage

TOKEN = "mcp-http-test-token"
INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}  # fmt: skip


@pytest.fixture(scope="module")
def served(brain_case: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`medcopilot mcp --http --port 0` in its own process: (its URL, its trace folder)."""
    trace = tmp_path_factory.mktemp("mcp_http") / "trace"
    cmd = [sys.executable, "-m", "copilot.cli", "mcp", "--http", "--port", "0", "--case", str(brain_case),
           "--trace-dir", str(trace)]  # fmt: skip
    env = {**os.environ, "MEDCOPILOT_TOKEN": TOKEN}
    log = trace.parent / "stderr.txt"
    with log.open("w") as err:  # a file, not a pipe nobody reads: the server never blocks on its log
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("listening on http://127.0.0.1:"), (line, log.read_text())
        yield line.split()[-1], trace
    finally:
        proc.terminate()
        proc.wait(20)


async def _client(url: str, token: str | None) -> tuple[list, object]:
    from mcp import ClientSession  # the client SDK is imported when the test runs, not at collection
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = (await session.list_tools()).tools
        result = await session.call_tool("observe", {"view": "red", "size": 128})
    return tools, result


def _post(
    url: str, body: bytes, headers: dict[str, str], declared: int | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One POST; with `declared`, only headers announcing that many bytes are sent (the server answers first)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if declared is None:
            conn.request("POST", parts.path, body=body, headers={**base, **headers})
        else:
            conn.putrequest("POST", parts.path)
            for key, value in {**base, **headers, "Content-Length": str(declared)}.items():
                conn.putheader(key, value)
            conn.endheaders()
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def test_client_lists_annotated_tools_and_observes_with_the_token(served: tuple[str, Path]) -> None:
    url, trace = served
    tools, result = anyio.run(_client, url, TOKEN)
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {s.name for s in RADIOLOGY.specs("A")}
    observe, scroll = by_name["observe"].annotations, by_name["scroll"].annotations
    assert observe is not None and scroll is not None
    assert (observe.read_only_hint, observe.destructive_hint, observe.idempotent_hint) == (True, False, True)
    assert (scroll.read_only_hint, scroll.idempotent_hint) == (True, False)  # a move relative to where it is
    assert by_name["image_coords_to_ras"].title == "Image coords to RAS"
    point = by_name["record_point"].annotations
    assert point is not None and (point.read_only_hint, point.destructive_hint) == (False, False)  # adds evidence

    assert not result.is_error
    envelope = json.loads(result.content[0].text)
    assert envelope["ok"] and [im["view"] for im in envelope["images"]] == ["red"]
    png = base64.b64decode(result.content[1].data)
    assert hashlib.sha256(png).hexdigest() == envelope["images"][0]["sha256"] and png_size(png) == (128, 128)
    events = [json.loads(x) for x in (trace / "trace.jsonl").read_text().splitlines()]
    assert [e["handler"] for e in events if e.get("actor") == "mcp"] == ["observe"]
    assert TOKEN not in (trace / "trace.jsonl").read_text()


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({}, 401, "unauthorized"),
        ({"Authorization": "Bearer not-the-token"}, 401, "unauthorized"),
        ({"Authorization": f"Bearer {TOKEN}", "Host": "rebound.example:8017"}, 403, "host_not_allowed"),
        ({"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"}, 403, "origin_not_allowed"),
    ],
)
def test_refused_before_the_sdk(served: tuple[str, Path], headers: dict[str, str], status: int, code: str) -> None:
    got, reply_headers, body = _post(served[0], json.dumps(INIT).encode(), headers)
    assert (got, json.loads(body)["error"]["code"]) == (status, code)
    assert (reply_headers.get("www-authenticate", "").startswith("Bearer")) == (status == 401)


def test_oversized_malformed_and_elsewhere(served: tuple[str, Path]) -> None:
    url, auth = served[0], {"Authorization": f"Bearer {TOKEN}"}
    status, _, body = _post(url, b"", auth, declared=(1 << 20) + 1)
    assert (status, json.loads(body)["error"]["code"]) == (413, "too_large")
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:  # no declared size: the body is counted as it arrives
        chunks = (b" " * (1 << 16) for _ in range(17))
        conn.request("POST", parts.path, body=chunks, headers={**auth, "Content-Type": "application/json"},
                     encode_chunked=True)  # fmt: skip
        response = conn.getresponse()
        assert (response.status, json.loads(response.read())["error"]["code"]) == (413, "too_large")
    finally:
        conn.close()
    status, _, body = _post(url, b'{"jsonrpc": "2.0", "id": 7, "method": ', auth)
    assert status == 400 and json.loads(body) == {**json.loads(body), "id": 7}
    assert json.loads(body)["error"]["code"] == -32700
    status, _, body = _post(url.replace("/mcp", "/other"), json.dumps(INIT).encode(), auth)
    assert (status, json.loads(body)["error"]["code"]) == (404, "not_found")


def test_sdk_client_without_the_token_fails(served: tuple[str, Path]) -> None:
    from mcp import MCPError

    with pytest.raises(BaseExceptionGroup) as info:  # the SDK's task group wraps the refusal of `initialize`
        anyio.run(_client, served[0], None)
    assert info.group_contains(MCPError, match="error response")


def test_annotations_follow_role_and_writes() -> None:
    for spec in RADIOLOGY.specs():
        hints = tool(spec).annotations
        assert hints is not None
        if spec.exports:  # a new DICOM object stored outside the session
            assert (hints.read_only_hint, hints.destructive_hint, hints.open_world_hint) == (False, True, True)
        elif spec.role == "viewer_control":
            assert (hints.read_only_hint, hints.destructive_hint) == (True, False), spec.name
    assert tool(RADIOLOGY.get("segment_statistics")).annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tool(RADIOLOGY.get("export_dicom_seg")).title == "Export DICOM SEG"


def _png(width: int, height: int, size: int) -> bytes:
    """Bytes that start as a PNG of that size (only the header is read) and are `size` long."""
    head = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)
    return head + b"\0" * (size - len(head))


def test_images_are_bounded() -> None:
    images = [EncodedImage("red", "image/png", _png(512, 512, 300_000), "a"),
              EncodedImage("green", "image/png", _png(2048, 2048, 1000), "big"),
              EncodedImage("yellow", "image/png", _png(512, 512, 300_000)),
              EncodedImage("red", "image/png", _png(512, 512, 300_000), "c")]  # fmt: skip
    outcome = CallOutcome("observe", True, 200, images=images)
    items = content(outcome)
    assert [i.type for i in items] == ["text", "image", "image", "text"]
    assert sum(len(i.data) for i in items if i.type == "image") == 2 * 400_000
    note = items[-1].text
    assert f"image 1 (green, big; sha256 {images[1].sha256})" in note and f"{MAX_IMAGE_SIDE} px" in note
    assert "image 3 (red, c;" in note and "1048576 characters" in note and "image 2" not in note
    assert len(json.dumps([i.model_dump(mode="json") for i in items])) < 1_048_576
    small = content(outcome, max_chars=10_000)
    assert [i.type for i in small] == ["text", "text"] and small[1].text.count("left out") == 4


def test_stdio_refuses_http_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "--case", "nowhere", "--port", "8017"]) == 2
    assert "--port only with --http" in capsys.readouterr().err


def test_a_hint_that_is_no_annotation_fails_at_declaration() -> None:
    from copilot.tools.registry import Registry, RegistryError

    def look(ctx: object) -> object:
        """Look."""

    for hints in ({"readOnly": True}, {"readOnlyHint": "yes"}, {"title": False}):
        with pytest.raises(RegistryError, match="not an MCP tool annotation"):
            Registry("radiology").handler(role="viewer_control", hints=hints)(look)  # type: ignore[arg-type]
