"""The local cache of retrieved series: bounded in size, least recently opened series evicted first.

Location: `MEDCOPILOT_PACS_CACHE`, else `$XDG_CACHE_HOME/medcopilot/pacs` (default `~/.cache/medcopilot/pacs`).
Bound: `MEDCOPILOT_PACS_CACHE_MB` MiB (default 4096). Layout: `SERVER/STUDY/SERIES/00001.dcm…`, where
each folder name is a short hash (no UID or host appears in a path a viewer or a model might show), and each
study and series folder holds `origin.json` (service root and UIDs, instance counts, whether the series is
complete; never credentials). The bound holds while a retrieval writes (`CacheBudget`); what an interrupted
retrieval left (`.*.part-PID` files, old `.*.partial-PID` folders) is swept when the next one starts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from copilot.pacs.errors import PacsError
from copilot.privatefs import write_private

ORIGIN_FILE = "origin.json"
DEFAULT_MB = 4096


def default_root() -> Path:
    """Where retrieved series are kept."""
    if os.environ.get("MEDCOPILOT_PACS_CACHE"):
        return Path(os.environ["MEDCOPILOT_PACS_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "medcopilot" / "pacs"


def default_bound() -> int:
    """The size bound in bytes."""
    try:
        mb = float(os.environ.get("MEDCOPILOT_PACS_CACHE_MB", DEFAULT_MB))
    except ValueError:
        mb = DEFAULT_MB
    return int(max(mb, 1.0) * 1024 * 1024)


def key(text: str) -> str:
    """A folder name for a URL or a UID: 16 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def read_origin(folder: Path) -> dict[str, Any] | None:
    """The origin recorded in a cached study or series folder, or None (a folder from anywhere else)."""
    try:
        data = json.loads((Path(folder) / ORIGIN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("dicomweb"), str) else None


def write_origin(folder: Path, origin: dict[str, Any]) -> None:
    write_private(folder / ORIGIN_FILE, json.dumps(origin, indent=1, sort_keys=True) + "\n")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _leftover_pid(name: str) -> int | None:
    """The process id in the name of a retrieval's temporary file or folder, or None for any other name."""
    for marker in (".part-", ".partial-"):
        head, sep, pid = name.rpartition(marker)
        if sep and head.startswith(".") and pid.isdigit():
            return int(pid)
    return None


def _tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class PacsCache:
    """Series folders under a root, kept under a size bound."""

    def __init__(self, root: str | Path | None = None, max_bytes: int | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.max_bytes = max_bytes if max_bytes is not None else default_bound()

    def study_dir(self, base: str, study: str) -> Path:
        return self.root / key(base) / key(study)

    def series_dir(self, base: str, study: str, series: str) -> Path:
        return self.study_dir(base, study) / key(series)

    def series_dirs(self) -> list[Path]:
        """Every cached series folder (complete or not)."""
        return [p.parent for p in self.root.glob(f"*/*/*/{ORIGIN_FILE}")]

    def incomplete(self) -> list[Path]:
        """Series folders holding fewer instances than the PACS listed (`pacs get` resumes them)."""
        return [d for d in self.series_dirs() if not (read_origin(d) or {}).get("complete")]

    def leftovers(self) -> list[Path]:
        """What retrievals of processes no longer running left behind."""
        if not self.root.is_dir():
            return []
        found = []
        for pattern in ("*/*/.*", "*/*/*/.*"):
            for path in self.root.glob(pattern):
                pid = _leftover_pid(path.name)
                if pid is not None and not _pid_alive(pid):
                    found.append(path)
        return found

    def sweep(self) -> tuple[int, int]:
        """Remove the leftovers of interrupted retrievals; how many and their bytes."""
        found = self.leftovers()
        freed = 0
        for path in found:
            freed += _tree_size(path)
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        return len(found), freed

    def size(self) -> int:
        """Bytes the cache holds."""
        return sum(f.stat().st_size for f in self.root.rglob("*") if f.is_file()) if self.root.is_dir() else 0

    def touch(self, folder: Path) -> None:
        """Mark a series as just used (eviction goes by this time)."""
        now = time.time()
        os.utime(folder / ORIGIN_FILE, (now, now))

    def evict(self, keep: Iterable[Path] = ()) -> list[Path]:
        """Remove least recently used series until the cache fits its bound (never those in `keep`)."""
        kept = {Path(p).resolve() for p in keep}
        sizes = {d: sum(f.stat().st_size for f in d.iterdir() if f.is_file()) for d in self.series_dirs()}
        total = self.size()
        removed = []
        for d in sorted(sizes, key=lambda d: (d / ORIGIN_FILE).stat().st_mtime):
            if total <= self.max_bytes:
                break
            if d.resolve() in kept:
                continue
            shutil.rmtree(d, ignore_errors=True)
            total -= sizes[d]
            removed.append(d)
            if not any(c.is_dir() for c in d.parent.iterdir()):
                shutil.rmtree(d.parent, ignore_errors=True)
        return removed

    def evict_one(self, keep: Iterable[Path]) -> int | None:
        """Remove the least recently used series not in `keep`; its bytes (None: nothing may go)."""
        kept = {Path(p).resolve() for p in keep}
        candidates = [d for d in self.series_dirs() if d.resolve() not in kept]
        if not candidates:
            return None
        oldest = min(candidates, key=lambda d: (d / ORIGIN_FILE).stat().st_mtime)
        size = _tree_size(oldest)
        shutil.rmtree(oldest, ignore_errors=True)
        if not any(c.is_dir() for c in oldest.parent.iterdir()):
            shutil.rmtree(oldest.parent, ignore_errors=True)
        return size

    def clear(self) -> int:
        """Remove everything the cache holds; the bytes freed."""
        freed = self.size()
        if self.root.is_dir():
            for child in self.root.iterdir():
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
        return freed


class CacheBudget:
    """The cache bound held while bytes arrive: `take(n)` before writing n bytes makes room by evicting least
    recently used series (never `keep`) and refuses (`pacs_cache_full`) when none is left to evict."""

    def __init__(self, cache: PacsCache, keep: Iterable[Path] = ()) -> None:
        self.cache, self.keep = cache, list(keep)
        self.used = cache.size()

    def take(self, n: int) -> None:
        while self.used + n > self.cache.max_bytes:
            freed = self.cache.evict_one(self.keep)
            if freed is None:
                raise PacsError(
                    "pacs_cache_full", f"the retrieval would exceed the cache bound of "
                    f"{self.cache.max_bytes / (1024 * 1024):.0f} MiB (MEDCOPILOT_PACS_CACHE_MB)",
                )  # fmt: skip
            self.used -= freed
        self.used += n

    def give(self, n: int) -> None:
        self.used -= n
