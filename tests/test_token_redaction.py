"""The token never reaches a trace: every route, with the token in the query string, in headers and in the
arguments; the token can come from a file or the environment; a non-ASCII token works end to end."""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path

import pytest

from copilot.runtime import open_session
from copilot.server.routes import API, ROUTES
from copilot.server.token import TokenError, resolve_token
from copilot.trace.redact import REDACTED, redact, register_secret
from tests.conftest import RunningServer

SLICER_ROUTES = (
    "/slicer/slice",
    "/slicer/screenshot",
    "/slicer/volumes",
    "/slicer/mrml/names",
    "/slicer/mrml/ids",
    "/slicer/system/version",
    "/slicer/exec",
    "/slicer/unknown",
)


def _send(srv: RunningServer, method: str, path: str, body: bytes | None, token: str) -> int:
    """One request carrying the token everywhere a careless client might put it."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.server.server_address[1], timeout=30)
    secret = token.encode()
    query = f"?access_token={token}&token={token}&note={token}&view=red&size=64"
    headers = {
        "Authorization": b"Bearer " + secret,
        "X-Api-Key": secret,
        "Cookie": b"session=" + secret,
        "Content-Type": "application/json",
    }
    try:
        conn.request(method, path + query, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _concrete(path: str) -> str:
    return path.replace("{name}", "ping").replace("{job_id}", "job-1")


def test_token_is_redacted_on_every_route(brain_case: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    session = open_session(brain_case, trace_dir=tmp_path / "trace")
    srv = RunningServer(session, slicer_compat=True)
    token = srv.token
    args = json.dumps({"access_token": token, "comment": f"my token is {token}", "url": f"x?token={token}"}).encode()
    statuses = {}
    try:
        for route in ROUTES:
            path = API + _concrete(route.path)
            statuses[route.operation] = _send(srv, route.method, path, args if route.method == "POST" else None, token)
        job = srv.client.request("POST", f"{API}/jobs/ping", {"comment": token})
        if job.status == 202:
            srv.client.request("GET", f"{API}/jobs/{job.body['job_id']}?token={token}")
        for path in SLICER_ROUTES:
            statuses[path] = _send(srv, "GET", path, None, token)
        served = srv.client.request("GET", f"{API}/trace")
    finally:
        srv.stop()
        session.close()
    assert statuses["call"] == 422 and statuses["/slicer/slice"] == 200  # the calls did reach the trace
    trace_text = (tmp_path / "trace" / "trace.jsonl").read_text(encoding="utf-8")
    assert token not in trace_text
    assert token not in json.dumps(served.body)
    assert REDACTED in trace_text  # the redaction happened (not merely an empty trace)
    events = [json.loads(line) for line in trace_text.splitlines()]
    reads = [e for e in events if e["type"] == "slicer_read"]
    assert reads and all(e["query"]["access_token"] == REDACTED for e in reads)
    calls = [e for e in events if e.get("handler") == "ping" and e["type"] == "handler_call"]
    assert any(e["args"].get("access_token") == REDACTED for e in calls)
    out, err = capfd.readouterr()
    assert token not in out and token not in err


def test_redaction_rules() -> None:
    register_secret("s3cr3t-value-42")
    event = {
        "args": {"token": "abc", "api_key": "k", "nested": [{"password": "p"}], "prompt_tokens": 12},
        "query": {"access_token": ["abc"], "view": ["red"]},
        "text": "GET /x?view=red&access_token=abc&size=2 with Bearer xyz and s3cr3t-value-42 inline",
    }
    out = redact(event)
    assert out["args"] == {
        "token": REDACTED,
        "api_key": REDACTED,
        "nested": [{"password": REDACTED}],
        "prompt_tokens": 12,
    }
    assert out["query"] == {"access_token": REDACTED, "view": ["red"]}
    assert out["text"] == f"GET /x?view=red&access_token={REDACTED}&size=2 with Bearer {REDACTED} and {REDACTED} inline"


def test_token_from_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "token"
    secret.write_text("from-the-file\n", encoding="utf-8")
    os.chmod(secret, 0o600)
    assert resolve_token(None, str(secret)) == ("from-the-file", "file")
    os.chmod(secret, 0o644)
    with pytest.raises(TokenError, match=f"run `chmod 600 {secret}`"):
        resolve_token(None, str(secret))
    monkeypatch.setenv("MEDCOPILOT_TOKEN", "from-the-env")
    assert resolve_token(None, None) == ("from-the-env", "env")
    assert resolve_token("given", None)[:2] == ("given", "option")
    with pytest.raises(TokenError):
        resolve_token(None, str(tmp_path / "missing"))
    (tmp_path / "blank").write_text("\n", encoding="utf-8")
    with pytest.raises(TokenError):
        resolve_token(None, str(tmp_path / "blank"))


def test_cli_documents_the_option_as_visible(capsys: pytest.CaptureFixture[str]) -> None:
    from copilot.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--token-file" in text and "visible to every local user" in text


def test_non_ascii_token_end_to_end(brain_case: Path) -> None:
    session = open_session(brain_case)
    srv = RunningServer(session)
    srv.server.token = "clé-令牌-ß"
    srv.client.token = "clé-令牌-ß"
    try:
        assert srv.client.call("ping").ok
        srv.client.token = "cle-令牌-ß"
        assert srv.client.call("ping").status == 401
    finally:
        srv.stop()


def test_host_with_text_after_an_ipv6_literal_is_refused(brain_case: Path) -> None:
    session = open_session(brain_case)
    srv = RunningServer(session)
    try:
        for host, expected in (("[::1]evil.example", 403), ("[::1]:8016", 200), ("localhost:x", 403)):
            reply = srv.client.request("GET", f"{API}/state", headers={"Host": host})
            assert reply.status == expected, host
    finally:
        srv.stop()
