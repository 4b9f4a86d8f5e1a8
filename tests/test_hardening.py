"""Bad input at every boundary: each class is reproduced and must end in a named refusal that changes nothing.

HTTP framing and limits (raw sockets), DNS rebinding, JSON limits, job and connection limits, U+2028 in
traces, bounded schemas, case-id traversal in `bench run`, malformed case packs and answers, damaged
images, and a command line that answers bad input with one line and exit code 2.
"""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
import socket
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pydicom
import pytest
import SimpleITK as sitk
from pydicom.data import get_testdata_file

from copilot.cases.pack import CaseError, load_case
from copilot.cli import main
from copilot.jobs import JobManager
from copilot.medflow.bench_run import run_batch
from copilot.medflow.runs import clear_trace_dir, confined
from copilot.medflow.score_cli import read_answers
from copilot.runtime import open_session
from copilot.server.limits import Limits, parse_json_body
from copilot.session import Session
from copilot.tools import PATHOLOGY, RADIOLOGY
from tests.conftest import RunningServer

API = "/medcopilot/v1"


# ----- raw HTTP -----
def _exchange(srv: RunningServer, data: bytes, wait: float = 5.0) -> bytes:
    """Send raw bytes (from a thread, so that a reply before the end of the upload is seen); return every
    byte received until the server closes or resets (ending in `<still open>` if `wait` passes)."""
    host, port = srv.server.server_address[:2]
    with socket.create_connection((host, port), timeout=wait) as sock:

        def upload() -> None:
            with contextlib.suppress(OSError):
                sock.sendall(data)

        sender = threading.Thread(target=upload, daemon=True)
        sender.start()
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            received += b"<still open>"
        except ConnectionResetError:  # the server closed with the upload unread: the reply came first
            pass
    return received


def _raw(srv: RunningServer, data: bytes, wait: float = 5.0) -> list[bytes]:
    """The status lines of every response to raw bytes (`<still open>` last if the server never closed)."""
    received = _exchange(srv, data, wait)
    return [line for line in received.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")] + (
        [b"<still open>"] if received.endswith(b"<still open>") else []
    )


def _envelope(received: bytes) -> tuple[bytes, dict[str, str], dict]:
    """The first response's status line, headers and JSON body."""
    head, _, rest = received.partition(b"\r\n\r\n")
    status, *lines = head.split(b"\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.decode().partition(":") for ln in lines)}
    return status, headers, json.loads(rest[: int(headers["content-length"])])


def _head(srv: RunningServer, method: str, path: str, extra: str = "", auth: bool = True) -> bytes:
    host, port = srv.server.server_address[:2]
    token = f"Authorization: Bearer {srv.token}\r\n" if auth else ""
    return f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{token}{extra}\r\n".encode()


@pytest.mark.parametrize("value", ["-5", "abc", "1e3", " 12x"])
def test_bad_content_length_gets_a_400_reply(server: RunningServer, value: str) -> None:
    received = _exchange(server, _head(server, "POST", f"{API}/handlers/ping", f"Content-Length: {value}\r\n") + b"{}")
    assert not received.endswith(b"<still open>")  # answered, then closed: nothing read to end of stream
    status, headers, body = _envelope(received)
    assert status == b"HTTP/1.1 400 Bad Request" and headers["connection"] == "close"
    assert headers["content-type"] == "application/json"
    assert body["ok"] is False and body["error"]["code"] == "invalid_request" and body["error"]["message"]


def test_absent_content_length_is_an_empty_body(server: RunningServer) -> None:
    statuses = _raw(server, _head(server, "POST", f"{API}/handlers/ping", "Connection: close\r\n"))
    assert statuses == [b"HTTP/1.1 200 OK"]


def test_oversized_body_is_refused_before_reading_and_before_auth(server: RunningServer) -> None:
    # only the headers are sent: the 413 comes back at once, and without a token it is still a 413
    for auth in (True, False):
        head = _head(server, "POST", f"{API}/handlers/ping", "Content-Length: 104857600\r\n", auth=auth)
        assert _raw(server, head)[0].startswith(b"HTTP/1.1 413")


def test_unread_body_is_never_parsed_as_the_next_request(server: RunningServer) -> None:
    smuggled = b"GET " + API.encode() + b"/state HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    head = _head(server, "POST", f"{API}/handlers/ping", f"Content-Length: {2 << 20}\r\n")
    assert _raw(server, head + smuggled) == [b"HTTP/1.1 413 Request Entity Too Large"]
    head = _head(server, "POST", f"{API}/handlers/ping", f"Content-Length: {len(smuggled)}\r\n", auth=False)
    assert _raw(server, head + smuggled) == [b"HTTP/1.1 401 Unauthorized"]


def test_chunked_body_over_the_limit_is_cut_off(server: RunningServer) -> None:
    chunk = b"x" * 65536
    body = b"".join(b"10000\r\n" + chunk + b"\r\n" for _ in range(20))  # 1.25 MiB, no Content-Length
    head = _head(server, "POST", f"{API}/handlers/ping", "Transfer-Encoding: chunked\r\n")
    assert _raw(server, head + body)[0].startswith(b"HTTP/1.1 413")


def test_slow_body_times_out(traced_session: Session) -> None:
    srv = RunningServer(traced_session)
    srv.server.limits = Limits(body_timeout_s=0.3, allowed_hosts=srv.server.limits.allowed_hosts)
    try:
        head = _head(srv, "POST", f"{API}/handlers/ping", "Content-Length: 10\r\n")
        assert _raw(srv, head + b"{")[0].startswith(b"HTTP/1.1 408")
    finally:
        srv.stop()


def test_slow_request_headers_time_out(traced_session: Session) -> None:
    srv = RunningServer(traced_session)
    srv.server.limits = replace(srv.server.limits, header_timeout_s=0.5)  # read as each connection is made
    host, port = srv.server.server_address[:2]
    head = _head(srv, "GET", f"{API}/state")
    try:
        for sent in (b"", head[:20]):  # nothing at all; a request line cut short
            started = time.monotonic()
            received = _exchange(srv, sent)
            assert 0.4 < time.monotonic() - started < 3.0 and not received.endswith(b"<still open>")
            status, headers, body = _envelope(received)
            assert status == b"HTTP/1.1 408 Request Timeout" and headers["connection"] == "close"
            assert body["ok"] is False and body["error"]["code"] == "request_timeout"
        # a kept-alive connection: its next request's headers are timed from their first byte
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(head)
            time.sleep(0.7)  # past the header limit, within keep-alive: the first request was complete
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            sock.sendall(head[:20])
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
            assert _envelope(reply)[2]["error"]["code"] == "request_timeout"
        assert srv.client.request("GET", f"{API}/state").status == 200  # complete requests are unaffected
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "invalid_json"),
        (b'{"view": "red", "offset": ' + b"9" * 5000 + b"}", "invalid_json"),
        (b'{"view": "red", "offset": 1e999}', "invalid_arguments"),
        (b'{"view": "red", "offset": NaN}', "invalid_arguments"),
        (b"\xff\xfe", "invalid_json"),
        (b'{"view": "red",}', "invalid_json"),
    ],
)
def test_json_limits(server: RunningServer, body: bytes, code: str) -> None:
    before = server.client.state()
    reply = server.client.request("POST", f"{API}/handlers/set_slice_offset", body)
    assert reply.error_code == code and reply.status == (400 if code == "invalid_json" else 422)
    assert server.client.state() == before


def test_dns_rebinding_is_refused_even_with_slicer_compat(server: RunningServer) -> None:
    c = server.client
    rebound = {"Host": f"attacker.example:{server.server.server_address[1]}"}
    for path in ("/slicer/screenshot", "/slicer/volumes", f"{API}/state"):
        reply = c.request("GET", path, auth=False, headers=rebound)
        assert reply.status == 403 and reply.error_code == "host_not_allowed", path
    page = {"Origin": "http://attacker.example"}
    assert c.request("GET", "/slicer/volumes", auth=False, headers=page).error_code == "origin_not_allowed"
    port = server.server.server_address[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        assert c.request("GET", "/slicer/volumes", auth=False, headers={"Host": host}).status == 200
    local_page = {"Origin": f"http://localhost:{port}"}
    assert c.request("GET", "/slicer/volumes", auth=False, headers=local_page).status == 200


def test_keep_alive_reuses_one_connection(server: RunningServer) -> None:
    c = server.client
    c.call("ping")
    sock = c._local.conn.sock
    for _ in range(5):
        assert c.call("ping").ok
    assert c._local.conn.sock is sock


def test_connection_limit_answers_503(traced_session: Session) -> None:
    """Cap 3: with 3 idle connections open, a 4th without the token is refused 503; one with the token is counted
    only against other authenticated requests and is served (fairness.py)."""
    srv = RunningServer(traced_session)
    srv.server._uvicorn.config.limit_concurrency = 3  # read as each connection is made
    host, port = srv.server.server_address[:2]
    try:
        idle = [socket.create_connection((host, port)) for _ in range(3)]
        time.sleep(0.3)
        refused = srv.client.request("GET", f"{API}/state", auth=False)
        assert refused.status == 503 and refused.error_code == "too_many_connections"
        assert srv.client.request("GET", f"{API}/state").status == 200
        for s in idle:
            s.close()
        time.sleep(0.3)
        srv.client.close()
        assert srv.client.request("GET", f"{API}/state").status == 200
    finally:
        srv.stop()


def test_slow_synchronous_call_is_cancelled_and_named(brain_case: Path, tmp_path: Path) -> None:
    srv = RunningServer(open_session(brain_case, track="B", trace_dir=tmp_path / "trace"))
    srv.server.limits = Limits(call_timeout_s=0.2, allowed_hosts=srv.server.limits.allowed_hosts)
    try:
        before = srv.client.state()
        args = {"fixed_volume": "T1", "moving_volume": "T2", "output_transform": "tx", "max_iterations": 2000}
        reply = srv.client.call("register_volumes", args)
        assert reply.status == 422 and reply.error_code == "call_timeout" and "jobs/register_volumes" in str(reply.body)
        assert srv.client.state() == before
    finally:
        srv.stop()


def test_unopenable_paths_are_refused_by_name(session: Session) -> None:
    for path in ("é" * 300, "images/" + "x" * 900, "a\x00b"):
        out = session.call("open_case", {"dicom_dir": path})
        assert out.status in (404, 422) and out.error["code"] in ("not_found", "path_outside_case")  # type: ignore[index]


def test_job_limits_and_pruning(session: Session) -> None:
    jobs = JobManager(session, max_active=2, kept=3)
    slow = [jobs.submit("observe", {"size": 2048, "view": "all"}) for _ in range(2)]
    with pytest.raises(Exception) as refused:
        jobs.submit("ping", {})
    assert getattr(refused.value, "code", None) == "too_many_jobs" and refused.value.status == 429
    for j in slow:
        assert j.done_event.wait(60)
    for _ in range(6):
        job = jobs.submit("ping", {})
        assert job.done_event.wait(10)
    assert len(jobs.jobs) <= 4 and job.id in jobs.jobs


def test_openapi_document_from_handler_schemas(server: RunningServer) -> None:
    doc = server.client.request("GET", f"{API}/openapi.json").body
    assert doc["openapi"].startswith("3.1")
    schemas = doc["components"]["schemas"]
    for h in server.client.handlers():
        op = doc["paths"][f"{API}/handlers/{h['name']}"]["post"]
        ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
        assert schemas[ref]["properties"] == h["parameters"]["properties"]
        assert {"200", "400", "401", "422"} <= set(op["responses"])
    assert server.client.request("GET", f"{API}/openapi.json", auth=False).status == 401


# ----- traces and answers -----
def test_u2028_label_keeps_the_trace_readable(server: RunningServer) -> None:
    c = server.client
    label = "lesion\u2028second line\u2029end\x85"
    assert c.call("record_key_slice", {"view": "red", "label": label}).ok
    events = c.trace()
    assert events[-1]["args"]["label"] == label
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "slicer_ext" / "MedCopilot"))
    from MedCopilotLib.web_handler import route  # the Slicer WebServer route reads traces the same way

    _, out = route(server.session, "tok", "GET", f"{API}/trace?access_token=tok", b"")
    assert json.loads(out)["events"][-1]["args"]["label"] == label


def test_answers_split_only_at_newline_and_bad_lines_reported(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    good = json.dumps({"case_id": "a", "response": "x\u2028ANSWER: A"}, ensure_ascii=False)
    big = '{"case_id": "b", "response": ' + "9" * 5000 + "}"
    path.write_text("\n".join([good, "{bad", big, "[1]", '{"case_id": "b"}', "[" * 100_000]) + "\n")
    got = read_answers(path)
    assert got.answers == {"a": "x\u2028ANSWER: A"}
    assert [p["line"] for p in got.problems] == [2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="no such answers file"):
        read_answers(tmp_path / "missing.jsonl")


# ----- schemas -----
def _unbounded(schema: object, path: str) -> list[str]:
    out = []
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("number", "integer") and not (
            {"minimum", "exclusiveMinimum"} & set(schema) and {"maximum", "exclusiveMaximum"} & set(schema)
        ):
            out.append(path)
        if kind == "string" and not {"maxLength", "enum", "const"} & set(schema):
            out.append(path)
        if kind == "array" and "maxItems" not in schema:
            out.append(path)
        for k, v in schema.items():
            out += _unbounded(v, f"{path}/{k}")
    elif isinstance(schema, list):
        for n, v in enumerate(schema):
            out += _unbounded(v, f"{path}[{n}]")
    return out


def test_every_schema_bounds_its_numbers_strings_and_lists() -> None:
    problems = [
        p for reg in (RADIOLOGY, PATHOLOGY) for s in reg.specs() for p in _unbounded(s.parameters_schema(), s.name)
    ]
    assert problems == []


def test_huge_finite_coordinates_are_refused_not_500(session: Session) -> None:
    before = session.snapshot()
    out = session.call("measure_distance", {"ras_a": [1e300, 0, 0], "ras_b": [-1e300, 0, 0]})
    assert out.status == 422 and out.error["code"] == "invalid_arguments"
    assert session.snapshot() == before


def test_limits_parse_is_shared() -> None:
    assert parse_json_body(b"") == {}
    with pytest.raises(Exception) as exc:
        parse_json_body(b"[" * 65 + b"]" * 65)
    assert exc.value.code == "invalid_json"  # type: ignore[attr-defined]


# ----- case packs and bench run -----
def _pack(src: Path, dest: Path, **changes: object) -> Path:
    shutil.copytree(src, dest)
    meta = json.loads((dest / "case.json").read_text())
    meta.update(changes)
    (dest / "case.json").write_text(json.dumps(meta))
    return dest


def test_case_id_traversal_never_deletes_outside_the_run(brain_case: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    cases = tmp_path / "cases"
    cases.mkdir()
    _pack(brain_case, cases / "evil_rel", case_id="../../../victim")
    _pack(brain_case, cases / "evil_abs", case_id=str(victim))
    _pack(brain_case, cases / "good", case_id="good")
    rows = run_batch(cases, "prior", tmp_path / "run", workers=1, progress=None)
    assert (victim / "precious.txt").read_text() == "keep me"
    assert [r["case_id"] for r in rows] == ["good"]  # the bad packs were skipped, the rest ran
    assert [p.parent.name for p in (tmp_path / "run" / "episodes").glob("**/trace.jsonl")] == ["good"]


def test_trace_folder_clearing_is_confined(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        confined(tmp_path, "episodes", "..", "x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "link").symlink_to(outside)
    with pytest.raises(ValueError, match="outside"):
        confined(tmp_path / "run", "link", "x")
    with pytest.raises(ValueError, match="symbolic link"):
        clear_trace_dir(tmp_path / "run" / "link")
    (outside / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a trace"):
        clear_trace_dir(outside)
    assert (outside / "notes.txt").exists()


BAD_CASE_JSON = [
    ("[]", "expected a JSON object"),
    ("{not json", "invalid JSON"),
    ('{"module": "brain_mri", "inputs": {}}', "missing 'case_id'"),
    ('{"case_id": ["a"], "module": "brain_mri", "inputs": {}}', "case_id"),
    ('{"case_id": "../x", "module": "brain_mri", "inputs": {}}', "case_id"),
    ('{"case_id": "/abs", "module": "brain_mri", "inputs": {}}', "case_id"),
    ('{"case_id": "a", "module": 3, "inputs": {}}', "'module' must be a module name"),
    ('{"case_id": "a", "module": "brain_mri", "inputs": "images"}', "'inputs' must be an object"),
    ('{"case_id": "a", "module": "brain_mri", "inputs": {"volumes": "images/T1.nii.gz"}}', "inputs.volumes"),
    ('{"case_id": "a", "module": "brain_mri", "inputs": {"volumes": [3]}}', "inputs.volumes[0]"),
    ('{"case_id": "a", "module": "brain_mri", "inputs": {"volumes": ["../../etc"]}}', "'..'"),
    ('{"case_id": "a", "module": "brain_mri", "inputs": {"volumes": ["/etc/passwd"]}}', "relative"),
    ('{"case_id": "a", "module": "brain_mri", "inputs": {"volumes": ["hidden/truth.json"]}}', "hidden"),
    ('{"case_id": "a", "module": "breast_wsi", "inputs": {"slide": ["a"]}}', "inputs.slide"),
    ('{"case_id": "a", "module": "brain_mri", "inputs": {}, "prompt": "x"}', "'prompt' must be an object"),
]


@pytest.mark.parametrize(("text", "expected"), BAD_CASE_JSON)
def test_malformed_case_json_is_named(tmp_path: Path, text: str, expected: str, capsys) -> None:
    (tmp_path / "case.json").write_text(text)
    with pytest.raises(CaseError, match=None) as exc:
        load_case(tmp_path)
    assert expected in str(exc.value) and "case.json" in str(exc.value)
    assert main(["run", "--case", str(tmp_path), "--policy", "prior", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error") and "Traceback" not in err[0]


# ----- command line -----
def _one_line_exit_2(capsys, argv: list[str], needle: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0], err


def test_cli_bad_input_is_one_line(brain_case: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    _one_line_exit_2(
        capsys, ["run", "--case", str(tmp_path), "--policy", "prior", "--out", str(tmp_path / "t")], "case.json"
    )
    _one_line_exit_2(
        capsys, ["bench", "score", "--cases", str(brain_case), "--answers", str(tmp_path / "no.jsonl")], "no.jsonl"
    )
    _one_line_exit_2(capsys, ["bench", "score", "--cases", str(tmp_path / "nowhere"), "--answers", "x"], "nowhere")
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "trace.jsonl").write_text('{"seq": 0}\n')
    _one_line_exit_2(
        capsys, ["serve", "--case", str(brain_case), "--port", "0", "--trace-dir", str(trace)], "already holds a trace"
    )
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    argv = ["run", "--case", str(brain_case), "--policy", "openai", "--out", str(tmp_path / "o")]
    _one_line_exit_2(capsys, argv, "OPENAI_BASE_URL")


def test_bench_score_reports_bad_lines_and_scores_the_rest(brain_case: Path, tmp_path: Path, capsys) -> None:
    case_id = load_case(brain_case).case_id
    answers = tmp_path / "a.jsonl"
    answers.write_text('{"case_id": "' + case_id + '", "response": "ANSWER: A\u2028"}\n{oops\n', encoding="utf-8")
    assert main(["bench", "score", "--cases", str(brain_case), "--answers", str(answers)]) == 1  # a bad line
    captured = capsys.readouterr()
    assert "a.jsonl:2" in captured.err and "Traceback" not in captured.err
    assert captured.out.split("\n")[1].split()[1] == "1"  # the good line was scored


def test_serve_on_an_unreadable_volume_is_one_line(brain_case: Path, tmp_path: Path, capsys) -> None:
    case = shutil.copytree(brain_case, tmp_path / "case")
    flair = case / "images" / "FLAIR.nii.gz"
    flair.write_bytes(flair.read_bytes()[:200])
    _one_line_exit_2(capsys, ["serve", "--case", str(case), "--port", "0", "--trace-dir", str(tmp_path / "t")], "FLAIR")


# ----- images -----
def _open_case_with(brain_case: Path, tmp_path: Path, name: str, data: bytes) -> tuple[Session, str]:
    case = _pack(brain_case, tmp_path / "case", inputs={"volumes": [f"images/{name}"]})
    (case / "images" / name).write_bytes(data)
    session = open_session(case, preload=False)
    before = json.dumps(session.snapshot(), sort_keys=True)
    out = session.call("open_case", {})
    assert not out.ok and json.dumps(session.snapshot(), sort_keys=True) == before
    return session, out.error["code"]  # type: ignore[index]


@pytest.mark.parametrize("fraction", [0.5, 0.0])
@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_truncated_nifti_is_refused(brain_case: Path, tmp_path: Path, suffix: str, fraction: float) -> None:
    image = sitk.GetImageFromArray(np.ones((8, 9, 10), np.float32))
    sitk.WriteImage(image, str(tmp_path / f"full{suffix}"))
    full = (tmp_path / f"full{suffix}").read_bytes()
    cut = (
        full[: max(352, int(len(full) * fraction))] if suffix == ".nii" else full[: int(len(full) * max(fraction, 0.3))]
    )
    _, code = _open_case_with(brain_case, tmp_path, f"T1{suffix}", cut)
    assert code == "truncated_image"


def _dicom_folder(folder: Path, n: int = 3, **overrides: object) -> list[pydicom.Dataset]:
    base = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    folder.mkdir(parents=True)
    out = []
    for k in range(n):
        ds = copy.deepcopy(base)
        ds.ImagePositionPatient = [0, 0, 2.5 * k]
        ds.InstanceNumber = k + 1
        ds.SOPInstanceUID = pydicom.uid.generate_uid()
        for key, value in overrides.items():
            if value is None:
                delattr(ds, key)
            else:
                setattr(ds, key, value)
        ds.save_as(folder / f"s{k}.dcm")
        out.append(ds)
    return out


def _open_dicom(brain_case: Path, tmp_path: Path, accept: bool = False) -> Session:
    inputs = {"volumes": ["images/series"], **({"accept_missing_geometry": True} if accept else {})}
    return open_session(_pack(brain_case, tmp_path / "case", inputs=inputs), preload=False)


def _write_series(tmp_path: Path, brain_case: Path, **overrides: object) -> Path:
    folder = tmp_path / "series"
    _dicom_folder(folder, **overrides)
    return folder


@pytest.mark.parametrize("missing", ["ImagePositionPatient", "ImageOrientationPatient", "PixelSpacing"])
def test_dicom_without_geometry_is_refused_unless_accepted(brain_case: Path, tmp_path: Path, missing: str) -> None:
    session = _open_dicom(brain_case, tmp_path)
    _dicom_folder(session.case.root / "images" / "series", **{missing: None})  # type: ignore[operator]
    out = session.call("open_case", {})
    assert out.error["code"] == "missing_geometry" and missing in out.error["message"]  # type: ignore[index]
    accepted = _open_dicom(brain_case, tmp_path / "b", accept=True)
    _dicom_folder(accepted.case.root / "images" / "series", **{missing: None})  # type: ignore[operator]
    ok = accepted.call("open_case", {})
    assert ok.ok and ok.result["inventory"][0]["geometry"] == "assumed"
    assert ok.state["volumes"] == accepted.snapshot()["volumes"]


def test_mixed_series_and_inconsistent_slices_are_refused(brain_case: Path, tmp_path: Path) -> None:
    session = _open_dicom(brain_case, tmp_path)
    series = session.case.root / "images" / "series"  # type: ignore[operator]
    _dicom_folder(series)
    _dicom_folder(tmp_path / "other", SeriesInstanceUID=pydicom.uid.generate_uid())
    for p in (tmp_path / "other").iterdir():
        shutil.copy(p, series / f"other_{p.name}")
    assert session.call("open_case", {}).error["code"] == "mixed_series"  # type: ignore[index]
    shutil.rmtree(series)
    written = _dicom_folder(series)
    small = written[1]
    small.Rows, small.Columns = 64, 64
    small.PixelData = np.zeros((64, 64), np.int16).tobytes()
    small.save_as(series / "s1.dcm")
    assert session.call("open_case", {}).error["code"] == "inconsistent_series"  # type: ignore[index]


def test_dicom_without_decodable_pixels_is_refused(brain_case: Path, tmp_path: Path) -> None:
    session = _open_dicom(brain_case, tmp_path)
    series = session.case.root / "images" / "series"  # type: ignore[operator]
    written = _dicom_folder(series)
    del written[1].PixelData
    written[1].save_as(series / "s1.dcm")
    assert session.call("open_case", {}).error["code"] == "undecodable_pixels"  # type: ignore[index]
    damaged = pydicom.dcmread(series / "s0.dcm")
    damaged.PixelData = b"\x00" * 10  # far fewer bytes than Rows x Columns
    damaged.ImagePositionPatient, damaged.SOPInstanceUID = [0, 0, 2.5], pydicom.uid.generate_uid()
    damaged.save_as(series / "s1.dcm")
    assert session.call("open_case", {}).error["code"] == "undecodable_pixels"  # type: ignore[index]


@pytest.mark.parametrize(("keep", "code"), [(0.5, "truncated_image"), (16, "truncated_image")])
def test_truncated_slides_are_refused(tmp_path: Path, keep: float, code: str) -> None:
    from copilot.medflow import make_cases

    case = make_cases("breast_wsi", 1, 5, tmp_path / "cases", slide_size=(1024, 768), mpp=1.0)[0]
    slide = case / "images" / "slide.tif"
    data = slide.read_bytes()
    slide.write_bytes(data[: int(len(data) * keep)] if keep < 1 else data[: int(keep)])
    session = open_session(case, preload=False)
    out = session.call("load_case", {})
    assert out.status == 422 and out.error["code"] == code  # type: ignore[index]
