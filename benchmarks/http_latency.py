"""Request latency of the handler server on a kept-alive connection against a new connection per request.

A client that keeps its connection must not pay more than one that reconnects every time (the goal:
kept-alive median within 2× of the fresh-connection median; it is usually lower). Measured in one run
on the same server, alternating the two clients: POST `ping` (small JSON body) and GET `/state`.
Run: `.venv/bin/python benchmarks/http_latency.py [--n 300]`.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from copilot.medflow import make_cases
from copilot.runtime import open_session
from copilot.server.client import RemoteViewer
from copilot.server.http import make_server


def _time(fn, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=300)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        case = make_cases("brain_mri", 1, 6, Path(tmp) / "cases", spacing=2.0)[0]
        session = open_session(case)
        token = secrets.token_urlsafe(16)
        server = make_server(session, "127.0.0.1", 0, token)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        kept = RemoteViewer(server.url, token, keep_alive=True)
        fresh = RemoteViewer(server.url, token, keep_alive=False)
        worst = 0.0
        try:
            print(
                f"{'request':<22} {'kept-alive ms':>14} {'new conn ms':>12} {'p95 kept':>9} {'p95 new':>8} {'ratio':>6}"
            )
            for label, call in (
                ("POST /handlers/ping", lambda c: c.request("POST", "/medcopilot/v1/handlers/ping", {})),
                ("GET /state", lambda c: c.request("GET", "/medcopilot/v1/state")),
            ):
                for c in (kept, fresh):  # warm-up
                    _time(lambda c=c, call=call: call(c), 20)
                a, b = [], []
                for _ in range(5):  # alternate so both see the same machine load
                    a += _time(lambda call=call: call(kept), ns.n // 5)
                    b += _time(lambda call=call: call(fresh), ns.n // 5)
                ma, mb = statistics.median(a), statistics.median(b)
                pa, pb = sorted(a)[int(0.95 * len(a))], sorted(b)[int(0.95 * len(b))]
                worst = max(worst, ma / mb)
                print(f"{label:<22} {ma:>14.2f} {mb:>12.2f} {pa:>9.2f} {pb:>8.2f} {ma / mb:>6.2f}")
        finally:
            kept.close()
            server.shutdown()
            server.server_close()
    print(f"kept-alive / new-connection median ratio (worst): {worst:.2f} (goal: <= 2)")
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
