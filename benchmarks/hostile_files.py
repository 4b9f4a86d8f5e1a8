"""Hostile files against a running `medcopilot serve`: a fixed set (detached data files that leave the case,
oversized tiles, looping IFDs, gzip bombs, DICOM positions that are no numbers) and seeded random mutations
of sound TIFF, NIfTI and NRRD files, each opened over HTTP while the server is watched.

Per file: the answer (status and code) and its time; after it, the server must still answer `ping`-like
calls and `GET /state`. A server that dies is restarted and counted; so is an answer over 10 s, a 5xx, and
a hidden-mask pixel or foreign file that reaches the viewer. The server's peak resident memory (VmHWM) is
reported. Run: `.venv/bin/python benchmarks/hostile_files.py [--mutants 120] [--seed 0]` (also part of
`benchmarks/fuzz.py`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from copilot.medflow import make_cases
from copilot.server.client import RemoteViewer
from tests.test_hostile_files import gzip_bomb_nifti, hostile_tiffs, metaimage, nrrd

ANSWER_LIMIT_S = 10.0


@dataclass
class Tally:
    """What the hostile files got."""

    files: int = 0
    accepted: int = 0
    refused: Counter = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)  # fixed cases answered otherwise than expected
    server_errors: int = 0
    crashes: int = 0
    slow: int = 0
    unanswered_pings: int = 0
    leaks: int = 0
    slowest_s: float = 0.0
    peak_rss_mb: float = 0.0

    @property
    def clean(self) -> bool:
        return not (
            self.wrong or self.server_errors or self.crashes or self.slow or self.unanswered_pings or self.leaks
        )


class Served:
    """`medcopilot serve` on a case in a child process (restarted when it dies)."""

    def __init__(self, case: Path, trace_root: Path) -> None:
        self.case, self.trace_root, self.starts = case, trace_root, 0
        self.token = "hostile-files-" + os.urandom(6).hex()
        self.start()

    def start(self) -> None:
        self.starts += 1
        env = {**os.environ, "MEDCOPILOT_TOKEN": self.token, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        cmd = [sys.executable, "-m", "copilot.cli", "serve", "--case", str(self.case), "--port", "0", "--track", "B"]
        cmd += ["--trace-dir", str(self.trace_root / f"trace-{self.starts}")]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if "listening on" not in line:
            raise RuntimeError(
                f"the server did not start: {line} {self.proc.stderr.read() if self.proc.stderr else ''}"
            )
        self.client = RemoteViewer(line.split("listening on", 1)[1].strip(), self.token, timeout=30)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def peak_rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err or ""


def fixed_radiology(case: Path) -> list[tuple[str, str]]:
    """(path in the case, expected refusal code) for the hand-made radiology files."""
    images = case / "images"
    nrrd(images / "to_hidden.nhdr", "../hidden/mask.nii.gz", encoding="gzip")
    nrrd(images / "to_proc.nhdr", "/proc/self/environ")
    nrrd(images / "to_passwd.nhdr", "/etc/passwd")
    nrrd(images / "list.nhdr", "LIST 2", extra="a.raw\n../hidden/truth.json\n")
    nrrd(images / "pattern.nhdr", "../hidden/s%02d.raw 0 1 1 2")
    nrrd(images / "endless.nhdr", "s%02d.raw 0 100000000 1 2")
    metaimage(images / "to_hidden.mhd", "../hidden/mask.nii.gz")
    metaimage(images / "to_proc.mhd", "/proc/self/environ")
    gzip_bomb_nifti(images / "bomb.nii.gz")
    os.symlink(case / "hidden", images / "linked")
    return [
        ("images/to_hidden.nhdr", "path_outside_case"),
        ("images/to_proc.nhdr", "path_outside_case"),
        ("images/to_passwd.nhdr", "path_outside_case"),
        ("images/list.nhdr", "path_outside_case"),
        ("images/pattern.nhdr", "path_outside_case"),
        ("images/endless.nhdr", "invalid_structure"),
        ("images/to_hidden.mhd", "path_outside_case"),
        ("images/to_proc.mhd", "path_outside_case"),
        ("images/bomb.nii.gz", "too_large"),
        ("images/linked/mask.nii.gz", "path_outside_case"),
    ]


def mutants(sound: bytes, n: int, rng: random.Random, head: int) -> list[bytes]:
    """`n` copies of `sound` with 1–8 random bytes of its first `head` bytes changed (or cut short)."""
    out = []
    for _ in range(n):
        b = bytearray(sound)
        if rng.random() < 0.1:
            out.append(bytes(b[: rng.randrange(8, len(b))]))
            continue
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(min(head, len(b)))] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        out.append(bytes(b))
    return out


def nifti_mutants(sound_gz: Path, n: int, rng: random.Random) -> list[bytes]:
    raw = gzip.decompress(sound_gz.read_bytes())
    return [gzip.compress(m, compresslevel=1) for m in mutants(raw, n, rng, 352)]


def exercise(served: Served, handler: str, arg: str, rel: str, expected: str | None, tally: Tally) -> None:
    """Open one file; check the answer, the time, and that the server answers afterwards."""
    tally.files += 1
    t0 = time.monotonic()
    try:
        reply = served.client.call(handler, {arg: rel})
        status, body = reply.status, reply.body
    except Exception as exc:  # connection dropped: the server may have died
        status, body = 0, {"error": {"code": f"no answer ({type(exc).__name__})"}}
    took = time.monotonic() - t0
    tally.slowest_s = max(tally.slowest_s, took)
    tally.slow += took > ANSWER_LIMIT_S
    if not served.alive():
        tally.crashes += 1
        tally.wrong.append(f"{rel}: the server died (exit {served.proc.returncode})")
        served.start()
        return
    code = body.get("error", {}).get("code") if isinstance(body, dict) and not body.get("ok") else None
    if status >= 500 or status == 0:
        tally.server_errors += 1
        tally.wrong.append(f"{rel}: {status} {code}")
    elif code is None:
        tally.accepted += 1
    else:
        tally.refused[code] += 1
    if expected is not None and code != expected:
        tally.wrong.append(f"{rel}: {code!r} instead of {expected!r}")
    if status == 200 and "hidden" in json.dumps(body.get("result", {})):
        tally.leaks += 1
    try:
        alive = served.client.request("GET", "/medcopilot/v1/state").status == 200
    except Exception:
        alive = False
    tally.unanswered_pings += not alive


def run(mutant_count: int, seed_value: int, out: Path) -> Tally:
    rng = random.Random(seed_value)
    tally = Tally()
    brain = make_cases("brain_mri", 1, 6, out / "cases", spacing=2.0)[0]
    slide = make_cases("breast_wsi", 1, 5, out / "cases", slide_size=(1024, 768), mpp=2.0)[0]
    sound_nifti = sorted((brain / "images").glob("*.nii.gz"))[0]  # picked before the gzip bomb joins them
    fixed = fixed_radiology(brain)
    tiffs = hostile_tiffs(slide / "images")
    for n, data in enumerate(nifti_mutants(sound_nifti, mutant_count // 3, rng)):
        (brain / "images" / f"mutant_{n:03d}.nii.gz").write_bytes(data)
    header = (brain / "images" / "to_proc.nhdr").read_bytes().replace(b"/proc/self/environ", b"ok.raw")
    (brain / "images" / "ok.raw").write_bytes(bytes(512))
    for n, data in enumerate(mutants(header, mutant_count // 3, rng, len(header))):
        (brain / "images" / f"mutant_{n:03d}.nhdr").write_bytes(data)
    sound_tiff = (slide / "images" / "tiled.tif").read_bytes()
    tiff_mutants = mutants(sound_tiff, mutant_count - 2 * (mutant_count // 3), rng, 512)
    for n, data in enumerate(tiff_mutants):
        (slide / "images" / f"mutant_{n:03d}.tif").write_bytes(data)

    radiology = Served(brain, out / "traces-radiology")
    try:
        for rel, code in fixed:
            exercise(radiology, "open_case", "dicom_dir", rel, code, tally)
        for p in sorted((brain / "images").glob("mutant_*")):
            exercise(radiology, "open_case", "dicom_dir", f"images/{p.name}", None, tally)
        tally.peak_rss_mb = max(tally.peak_rss_mb, radiology.peak_rss_mb())
    finally:
        err = radiology.stop()
    tally.unanswered_pings += err.count("Traceback")  # a traceback on stderr counts as a failure too
    pathology = Served(slide, out / "traces-pathology")
    try:
        for name, code in (("huge_tiles", "too_large"), ("loop", "invalid_structure"), ("dims", "invalid_structure")):
            exercise(pathology, "load_image", "path", f"images/{tiffs[name].name}", code, tally)
        for p in sorted((slide / "images").glob("mutant_*")):
            exercise(pathology, "load_image", "path", f"images/{p.name}", None, tally)
        tally.peak_rss_mb = max(tally.peak_rss_mb, pathology.peak_rss_mb())
    finally:
        err = pathology.stop()
    tally.unanswered_pings += err.count("Traceback")
    return tally


def report(t: Tally) -> None:
    refused = ", ".join(f"{k} {v}" for k, v in sorted(t.refused.items()))
    print(f"hostile files: {t.files} opened, {t.accepted} accepted, {sum(t.refused.values())} refused ({refused})")
    print(
        f"  5xx {t.server_errors}; server deaths {t.crashes}; answers over {ANSWER_LIMIT_S:g} s {t.slow} "
        f"(slowest {t.slowest_s:.2f} s); state unanswered or tracebacks {t.unanswered_pings}; leaks {t.leaks}; "
        f"server peak RSS {t.peak_rss_mb:.0f} MB"
    )
    for line in t.wrong[:20]:
        print("  problem:", line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mutants", type=int, default=120, help="random mutants of sound TIFF, NIfTI and NRRD files")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tally = run(ns.mutants, ns.seed, Path(tmp))
        report(tally)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if tally.clean else 1


if __name__ == "__main__":
    sys.exit(main())
