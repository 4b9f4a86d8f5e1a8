"""Peak memory and wall time of `cases make --module all --n 1` (every module's first case at its default size;
the goal is 500 MB), then of writing synthetic slides: `cases make --module breast_wsi` at 8192×6144 and
100000×80000 px, tile by tile, beside the whole-image way (the slide in memory, then written) where that fits.

Each measure runs in its own child process and reads the child's peak resident set (VmHWM of
/proc/self/status, which starts afresh at exec, unlike ru_maxrss). A 100000×80000 slide painted by the
breast generator takes about half an hour on one core, so by default the big slide is written by the
same tiled writer from a cheap tile source (one painted tile repeated, JPEG-encoded for real): the memory
bound and the writer's rate; `--full` paints it for real. Output goes to a temporary folder, deleted after.

Run: `.venv/bin/python benchmarks/cases_make.py [--full] [--skip-big]`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
from pathlib import Path
mode, size, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
w, h = (int(v) for v in size.split("x"))
t0 = time.perf_counter()
if mode == "all":
    from copilot.cli import main
    assert main(["cases", "make", "--module", "all", "--n", "1", "--out", str(out)]) == 0
elif mode == "cli":
    from copilot.cli import main
    assert main(["cases", "make", "--module", "breast_wsi", "--slide-size", size, "--out", str(out)]) == 0
elif mode == "fast":
    from copilot.cases import wsi
    real = wsi.write_pyramid_tiles
    def cheap(path, shape, source, mpp, *a, **k):
        tile = source(256, 256, 256, 256)  # one painted tile of a small slide, repeated (cropped at the edges)
        return real(path, (h, w), lambda y, x, th, tw: tile[:th, :tw], mpp, *a, **k)
    wsi.write_pyramid_tiles = cheap
    wsi.make_breast_case(out, "big", 0, size=(1024, 768))
elif mode == "whole":
    import numpy as np, tifffile
    from PIL import Image
    from copilot.cases import wsi
    grabbed = {}
    def grab(path, shape, source, mpp, *a, **k):
        grabbed["shape"], grabbed["source"] = shape, source
        return path
    wsi.write_pyramid_tiles = grab
    wsi.make_breast_case(out, "whole", 0, size=(w, h))
    image = np.zeros((h, w, 3), np.uint8)
    for y in range(0, h, 256):
        for x in range(0, w, 256):
            image[y : y + 256, x : x + 256] = grabbed["source"](y, x, min(256, h - y), min(256, w - x))
    pil = Image.fromarray(image)
    with tifffile.TiffWriter(out / "whole.tif", bigtiff=True) as tw:
        for n, d in enumerate((1, 4, 16)):
            level = image if d == 1 else np.asarray(pil.reduce(d))
            tw.write(level, tile=(256, 256), compression="jpeg", compressionargs={"level": 90}, photometric="rgb",
                     subfiletype=0 if n == 0 else 1, metadata=None)
wall = time.perf_counter() - t0
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print("RESULT " + json.dumps({"wall_s": wall, "vmhwm_mb": hwm / 1024}))
"""


def measure(mode: str, size: str) -> dict:
    """Run one child; its wall time, peak RSS and the bytes it wrote."""
    out = Path(tempfile.mkdtemp(prefix="cases_make_", dir="/tmp"))
    try:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, mode, size, str(out)],
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - t0
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            raise RuntimeError(f"{mode} {size} failed: {proc.stderr[-2000:]}")
        result = json.loads(line[7:])
        result["process_s"] = elapsed
        result["bytes"] = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
        result["progress_lines"] = sum(1 for x in proc.stderr.splitlines() if x.endswith("%"))
        return result
    finally:
        shutil.rmtree(out, ignore_errors=True)


def row(label: str, size: str, r: dict) -> str:
    w, h = (int(v) for v in size.split("x"))
    rate = w * h / 1e6 / r["wall_s"]
    return (
        f"{label:<34} {size:>13}  peak RSS {r['vmhwm_mb']:7.0f} MB  wall {r['wall_s']:7.1f} s  "
        f"{rate:6.1f} Mpx/s  file {r['bytes'] / 1e6:8.1f} MB  progress lines {r.get('progress_lines', 0)}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="paint the 100000×80000 slide for real (about 30 min)")
    ap.add_argument("--skip-big", action="store_true", help="only the 8192×6144 slide")
    ns = ap.parse_args()
    every = measure("all", "0x0")
    print(f"{'cases make --module all --n 1':<34} {'':>13}  peak RSS {every['vmhwm_mb']:7.0f} MB  wall "
          f"{every['wall_s']:7.1f} s  (goal: 500 MB)", flush=True)  # fmt: skip
    print(row("cases make (tile by tile)", "8192x6144", measure("cli", "8192x6144")), flush=True)
    print(row("whole image in memory, then write", "8192x6144", measure("whole", "8192x6144")), flush=True)
    if not ns.skip_big:
        big = "100000x80000"
        if ns.full:
            print(row("cases make (tile by tile)", big, measure("cli", big)), flush=True)
        else:
            print(row("tiled writer, one tile repeated", big, measure("fast", big)), flush=True)
        print(
            f"{'whole image in memory':<34} {big:>13}  not run: {100000 * 80000 * 3 / 2**30:.0f} GiB of RGB", flush=True
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
