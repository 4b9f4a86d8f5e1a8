"""`make demo`: make a brain case, drive it over the real HTTP server with a scripted handler sequence,
write the trace, replay it, and report where the views were written."""

from __future__ import annotations

import json
import secrets
import shutil
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from copilot.medflow import make_cases
from copilot.replay import replay
from copilot.runtime import open_session
from copilot.server.client import RemoteViewer
from copilot.server.http import make_server


def demo_script() -> list[dict[str, Any]]:
    """The packaged scripted handler sequence (resources/scripts/brain_demo.json)."""
    path = Path(__file__).resolve().parent.parent / "resources" / "scripts" / "brain_demo.json"
    if not path.is_file():  # installed without the source tree
        path = Path(str(resources.files("copilot"))) / "brain_demo.json"
    return json.loads(path.read_text(encoding="utf-8"))["calls"]


def run_demo(out: Path, spacing: float = 1.0) -> int:
    out = out.resolve()
    for sub in ("trace", "views"):
        shutil.rmtree(out / sub, ignore_errors=True)
    case_dirs = sorted((out / "cases").glob("brain_mri_*"))
    case = case_dirs[0] if case_dirs else make_cases("brain_mri", 1, 0, out / "cases", spacing=spacing)[0]
    print(f"case: {case}")
    session = open_session(case, trace_dir=out / "trace")
    token = secrets.token_urlsafe(16)
    server = make_server(session, "127.0.0.1", 0, token)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    print(f"listening on {server.url}")
    client = RemoteViewer(server.url, token)
    views = out / "views"
    views.mkdir(parents=True, exist_ok=True)
    print(f"{len(client.handlers())} handlers offered")
    try:
        for n, step in enumerate(demo_script()):
            reply = client.call(step["handler"], step["args"])
            written = []
            for m, (view, data) in enumerate(reply.images()):
                path = views / f"{n:02d}_{step['handler']}_{m}_{view}.png"
                path.write_bytes(data)
                written.append(path.name)
            status = "ok" if reply.ok else f"refused ({reply.error_code}: {reply.body['error']['message']})"
            print(f"  {n:2d} {step['handler']:<24} {status}  {len(written)} image(s)")
    finally:
        server.shutdown()
        server.server_close()
        session.close({"status": "completed"})
    report = replay(out / "trace")
    print(report.summary())
    print(f"views written to {views}")
    print(f"trace written to {out / 'trace'}")
    from copilot.pacs_demo import run_pacs_demo

    shutil.rmtree(out / "pacs-trace", ignore_errors=True)
    pacs_ok = run_pacs_demo(out)  # only where Orthanc is installed
    return 0 if report.ok and pacs_ok else 1
