"""Schema-driven fuzzing of the handler server: ≥ 10,000 calls over real HTTP on a radiology case
(Track B: every handler) and a pathology case, then hand-made HTTP probes.

Prints calls, accepted, refused, 5xx, dropped connections and refusals that changed the state (all
three must be 0) per case kind and in total; then opens hostile files on a served case
(`benchmarks/hostile_files.py`: references that leave the case, oversized tiles, looping IFDs, gzip bombs,
random mutants of sound files), which must give no 5xx, no server death, no answer over 10 s and no leak;
exits 1 otherwise.
Run: `.venv/bin/python benchmarks/fuzz.py [--calls 10000] [--seed 0] [--hostile-mutants 120]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import hostile_files
from copilot.medflow import make_cases
from copilot.runtime import open_session
from copilot.server.client import RemoteViewer
from copilot.server.http import make_server
from tests.schema_fuzz import Fuzzer, FuzzStats, handler_call, hints_for

TRAVERSALS = [
    "hidden",
    "hidden/truth.json",
    "./hidden/truth.json",
    "images/../hidden/truth.json",
    "images/./../hidden",
    "../",
    "../../../../etc/passwd",
    "/etc/passwd",
    "..\\hidden\\truth.json",
    "%2e%2e/hidden",
    "images/../../",
    "images/\u0000/../hidden",
]


def probe_paths(client: RemoteViewer, handlers: list[dict], case: Path) -> tuple[int, int]:
    """Every path-like argument of every handler with traversal attempts: (attempts, reached hidden/)."""
    attempts = reached = 0
    for h in handlers:
        for arg in h["parameters"].get("properties", {}):
            if not any(word in arg for word in ("path", "dir", "file")):
                continue
            for path in [*TRAVERSALS, str(case / "hidden" / "truth.json"), str(case / "hidden")]:
                attempts += 1
                reply = client.call(h["name"], {arg: path})
                if reply.ok and "hidden" in json.dumps(reply.body.get("result", {})):
                    reached += 1
    return attempts, reached


def probe_http(server_url: str, token: str) -> tuple[int, int]:
    """Hand-made HTTP probes, each with the status it must get: (probes, wrong answers)."""
    host, port = server_url.rsplit("/", 1)[-1].split(":")
    probes: list[tuple[str, str, dict[str, str], bytes, int]] = [
        ("GET", "/slicer/screenshot", {"Host": f"attacker.example:{port}"}, b"", 403),
        ("GET", "/slicer/volumes", {"Origin": "http://attacker.example"}, b"", 403),
        ("GET", "/medcopilot/v1/state", {"Authorization": "Bearer wrong"}, b"", 401),
        ("POST", "/medcopilot/v1/handlers/ping", {"Content-Length": "-1"}, b"{}", 400),
        ("POST", "/medcopilot/v1/handlers/ping", {"Content-Length": "x"}, b"{}", 400),
        ("POST", "/medcopilot/v1/handlers/ping", {"Content-Length": str(2 << 20)}, b"", 413),
        ("POST", "/medcopilot/v1/handlers/ping", {}, b"[" * 50_000 + b"]" * 50_000, 400),
        ("POST", "/medcopilot/v1/handlers/ping", {}, b'{"a": ' + b"1" * 5000 + b"}", 400),
        ("GET", "/slicer/exec", {}, b"", 403),
    ]
    wrong = 0
    for method, path, headers, body, expected in probes:
        sent = {"Host": f"{host}:{port}", "Authorization": f"Bearer {token}", **headers}
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in sent.items())
        if "Content-Length" not in headers:
            head += f"Content-Length: {len(body)}\r\n"
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)
            reply = b""
            with contextlib.suppress(OSError):
                while chunk := sock.recv(65536):
                    reply += chunk
        status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0
        if status != expected:
            wrong += 1
            print(f"  probe {method} {path} {headers}: {status}, expected {expected}")
    return len(probes), wrong


def fuzz_case(case: Path, track: str, calls: int, seed_value: int, trace: Path) -> FuzzStats:
    """Serve one case and send `calls` schema-driven calls to it over one kept-alive connection."""
    session = open_session(case, track=track, trace_dir=trace)
    token = secrets.token_urlsafe(16)
    server = make_server(session, "127.0.0.1", 0, token, slicer_compat=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = RemoteViewer(server.url, token, timeout=60)
    try:
        handlers = client.handlers()
        fuzzer = Fuzzer(client)
        hints = hints_for(client)

        @seed(seed_value)
        @settings(max_examples=calls, database=None, deadline=None, suppress_health_check=list(HealthCheck))
        @given(st.data())
        def run(data: st.DataObject) -> None:
            fuzzer.send(*data.draw(handler_call(handlers, hints)))

        run()
        attempts, reached = probe_paths(client, handlers, case)
        probes, wrong = probe_http(server.url, token)
        print(
            f"  {case.name}: {attempts} traversal attempts, {reached} reached hidden/; "
            f"{probes} HTTP probes, {wrong} wrong"
        )
        fuzzer.stats.probe_failures += reached + wrong
        return fuzzer.stats
    finally:
        client.close()
        server.shutdown()
        server.server_close()
        session.close({"status": "fuzzed"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=10_000, help="calls in total (split between the two cases)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hostile-mutants", type=int, default=120, help="mutated files opened (0: hostile set only)")
    parser.add_argument("--no-hostile", action="store_true", help="skip the hostile files")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        brain = make_cases("brain_mri", 1, 6, out / "cases", spacing=2.0)[0]
        slide = make_cases("breast_wsi", 1, 5, out / "cases", slide_size=(2048, 1536), mpp=0.5)[0]
        share = {
            "radiology (track B)": (brain, "B", ns.calls * 6 // 10),
            "pathology": (slide, "B", ns.calls - ns.calls * 6 // 10),
        }
        total = FuzzStats()
        print(
            f"{'case':<22} {'calls':>7} {'accepted':>9} {'refused':>8} {'5xx':>5} {'dropped':>8} "
            f"{'changed':>8} {'s':>6}"
        )
        for label, (case, track, calls) in share.items():
            t0 = time.perf_counter()
            s = fuzz_case(case, track, calls, ns.seed, out / f"trace-{track}-{case.name}")
            took = time.perf_counter() - t0
            print(
                f"{label:<22} {s.calls:>7} {s.accepted:>9} {s.refused:>8} {s.server_errors:>5} {s.dropped:>8} "
                f"{s.changed_on_refusal:>8} {took:>6.0f}"
            )
            for name in ("calls", "accepted", "refused", "server_errors", "dropped", "changed_on_refusal"):
                setattr(total, name, getattr(total, name) + getattr(s, name))
            total.unlabelled_refusals += s.unlabelled_refusals
            total.probe_failures += s.probe_failures
            total.examples += s.examples
        print(
            f"{'total':<22} {total.calls:>7} {total.accepted:>9} {total.refused:>8} {total.server_errors:>5} "
            f"{total.dropped:>8} {total.changed_on_refusal:>8}"
        )
        print(f"refusals without code/message: {total.unlabelled_refusals}; probe failures: {total.probe_failures}")
        for example in total.examples:
            print("  problem:", example)
        hostile_clean = True
        if not ns.no_hostile:
            tally = hostile_files.run(ns.hostile_mutants, ns.seed, out / "hostile")
            hostile_files.report(tally)
            hostile_clean = tally.clean
    return 0 if total.clean and hostile_clean else 1


if __name__ == "__main__":
    sys.exit(main())
