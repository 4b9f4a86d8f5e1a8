"""Opening a slide first in a child process with memory, CPU-time and wall-clock limits.

TIFF-based slides are checked in-process by walking their structure (`slide_checks`), which is enough for
the failures known to kill or freeze a reader (oversized tiles, looping directory chains, data beyond the
file). Every other format OpenSlide reads (MIRAX, Hamamatsu VMS, Leica, DICOM WSI, ...) is opened once in a
child first: `openslide.OpenSlide`, every level's size, one tile of the coarsest level and a thumbnail. A
child that aborts, is killed by a limit or runs out of time is a refusal by name — `too_large` (memory),
`timeout` (wall or CPU time), `invalid_structure` (any other death) — and the server never runs the code
that failed; an ordinary refusal by OpenSlide is left to the in-process open, which names it (or falls back
to tiffslide). A file that passed is remembered by identity (path, size, modification time).
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from pathlib import Path

from copilot.errors import HandlerError

WALL_S = 10.0
CPU_S = 20
MEMORY_BYTES = 4 << 30  # address space of the child
_CHILD = """
import json, resource, sys
memory, cpu = int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
import openslide
s = openslide.OpenSlide(sys.argv[1])
dims = [list(d) for d in s.level_dimensions]
top = len(dims) - 1
w, h = dims[top]
s.read_region((0, 0), top, (min(w, 256), min(h, 256))).load()
s.get_thumbnail((64, 64)).load()
print(json.dumps({"levels": dims}))
"""


class ProbeError(HandlerError):
    """A slide the child process could not open within its limits."""


def probe_slide(path: Path) -> None:
    """Refuse a slide that a child process cannot open within the limits (cached for an unchanged file)."""
    st = path.stat()
    _probe(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _probe(path: str, size: int, mtime_ns: int) -> None:
    name = Path(path).name
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, path, str(MEMORY_BYTES), str(CPU_S)],
            capture_output=True,
            timeout=WALL_S,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ProbeError("timeout", f"{name}: opening it took longer than {WALL_S:g} s") from None
    if done.returncode == 0:
        return
    err = done.stderr.decode("utf-8", "replace")
    last = next((ln.strip() for ln in reversed(err.splitlines()) if ln.strip()), "")[:300]
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise ProbeError("timeout", f"{name}: opening it used more than {CPU_S} s of CPU time")
    if "MemoryError" in err or "failed to allocate" in err or "Cannot allocate" in err:
        raise ProbeError("too_large", f"{name}: opening it needs more than {MEMORY_BYTES >> 30} GiB of memory")
    if done.returncode < 0:
        raise ProbeError("invalid_structure", f"{name}: the reader died on it (signal {-done.returncode}): {last}")
    # an ordinary refusal by OpenSlide (e.g. a format it does not know): the in-process open names it
