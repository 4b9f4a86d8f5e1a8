"""`observe` of three 512² views over HTTP: ours against SimpleITK `Resample` + Pillow and a bare floor.

Run: `.venv/bin/python benchmarks/observe_http.py [--n 60]` (about twenty seconds). Two handler servers on
the loopback, each with a session on the 1 mm MNI T1 template (197×233×189), are asked in turn on kept-alive
connections for POST `observe` {"view": "all", "size": 512}: the whole path (validation, three renders, PNG
encoding, state snapshot, JSON with base64 images, the client's parse). Before each request the three views are
scrolled to a new offset (untimed), so nothing is served from a cache of images.

- ours: the embedded viewer (its current renderer) and the session's PNG writer;
- naive: the same server and session with a viewer whose render is SimpleITK `Resample` + window/level +
  Pillow (no corner text) and Pillow's PNG writer at zlib level 1;
- floor: POST `ping` on the same connection (transport, dispatch, state snapshot) plus three numpy gathers of
  a view's pixels with indices computed beforehand (sampling only, nothing encoded).

Prints median / 95th percentile in ms and the ratios; goals: ours ≤ 10 ms median and ≥ 2.5× naive.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import SimpleITK as sitk
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.render import floor_indices, naive_layer, stats
from copilot.cases.brain import TEMPLATE_FILES, template_dir
from copilot.engine.png import LEGACY_PNG_ENCODER, PNG_ENCODER
from copilot.engine.volume.image import Volume, volume_from_sitk
from copilot.engine.volume.render import RENDERER, Layer
from copilot.engine.volume.viewer import EmbeddedVolumeViewer
from copilot.runtime import new_session
from copilot.server.client import RemoteViewer
from copilot.server.http import make_server

VIEWS = ("red", "yellow", "green")
GOAL_MS, GOAL_RATIO = 10.0, 2.5


class NaiveViewer(EmbeddedVolumeViewer):
    """The embedded viewer's scene, drawn by SimpleITK Resample + Pillow."""

    def render(self, view: str, size: tuple[int, int], remember: bool = True) -> Image.Image:
        vid = self.resolve_volume()
        return naive_layer(Layer(self.volume(vid), self.display(vid)), self.view(view).image_to_ras_matrix(size), size)


def serve(viewer: EmbeddedVolumeViewer, volume: Volume, png_encoder: str | None = None) -> tuple[Any, RemoteViewer]:
    viewer.recover_standard_views(viewer.add_volume(volume))
    extra = {"png_encoder": png_encoder} if png_encoder else {}
    session = new_session("radiology", viewer=viewer, **extra)
    token = secrets.token_urlsafe(16)
    server = make_server(session, "127.0.0.1", 0, token)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server, RemoteViewer(server.url, token, keep_alive=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=60)
    ns = parser.parse_args()
    t1 = volume_from_sitk(sitk.ReadImage(str(template_dir() / TEMPLATE_FILES["t1"]), sitk.sitkFloat32), "T1")
    ours_viewer, naive_viewer = EmbeddedVolumeViewer(), NaiveViewer()
    servers = [serve(ours_viewer, t1), serve(naive_viewer, t1, LEGACY_PNG_ENCODER)]
    (_, ours), (_, naive) = servers
    ranges = {v: ours_viewer.slice_offset_range(v) for v in VIEWS}
    flat = t1.data.ravel()
    indices = [floor_indices(t1, ours_viewer, v, (512, 512)) for v in VIEWS]
    samples: dict[str, list[float]] = {"ours": [], "naive": [], "floor": []}
    cpu: dict[str, list[float]] = {"ours": [], "naive": []}  # this process: client and server threads
    sizes: dict[str, int] = {}
    load = os.getloadavg()[0]
    try:
        for n in range(ns.n + 3):  # the first three are warm-up
            t = 0.2 + 0.6 * (n % 17) / 16
            for viewer in (ours_viewer, naive_viewer):
                for v in VIEWS:
                    lo, hi = ranges[v]
                    viewer.set_slice_offset(v, lo + t * (hi - lo))
            for name, client in (("ours", ours), ("naive", naive)):
                c0, t0 = time.process_time(), time.perf_counter()
                reply = client.call("observe", {"view": "all", "size": 512})
                ms, cpu_ms = (time.perf_counter() - t0) * 1000.0, (time.process_time() - c0) * 1000.0
                if not reply.ok or len(reply.images()) != 3:
                    raise RuntimeError(f"{name}: observe failed: {reply.body}")
                sizes[name] = sum(len(data) for _, data in reply.images())
                if n >= 3:
                    samples[name].append(ms)
                    cpu[name].append(cpu_ms)
            t0 = time.perf_counter()
            ours.call("ping", {})
            for idx in indices:
                flat.take(idx)
            if n >= 3:
                samples["floor"].append((time.perf_counter() - t0) * 1000.0)
    finally:
        for server, client in servers:
            client.close()
            server.shutdown()
            server.server_close()
    load = max(load, os.getloadavg()[0])
    (om, op), (nm, np95), (fm, fp) = (stats(samples[k]) for k in ("ours", "naive", "floor"))
    print(f"observe 3 × 512² over HTTP, {ns.n} requests each, kept-alive, wall ms (median / p95); renderer "
          f"{RENDERER}, PNG {PNG_ENCODER}")  # fmt: skip
    print(f"  ours   {om:6.2f} / {op:6.2f}   ({sizes['ours'] // 1024} KiB of PNG)")
    print(f"  naive  {nm:6.2f} / {np95:6.2f}   ({sizes['naive'] // 1024} KiB of PNG)  naive/ours {nm / om:.1f}× / "
          f"{np95 / op:.1f}×")  # fmt: skip
    print(f"  cpu median (client + server threads): ours {statistics.median(cpu['ours']):.2f}, naive "
          f"{statistics.median(cpu['naive']):.2f}")  # fmt: skip
    print(f"  floor  {fm:6.2f} / {fp:6.2f}   (ping + three numpy gathers)  ours/floor {om / fm:.1f}×")
    print(f"load average (1 min) up to {load:.2f} on {os.cpu_count()} cores" + ("  (under load: noisy)" * (load > 1)))
    met = om <= GOAL_MS and nm / om >= GOAL_RATIO  # goals on the medians
    print(f"goals: ours ≤ {GOAL_MS} ms median, naive/ours ≥ {GOAL_RATIO}×: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
