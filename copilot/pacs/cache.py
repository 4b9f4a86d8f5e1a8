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
import stat
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from copilot.pacs.errors import PacsError
from copilot.privatefs import remove_inside, write_private

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
    """Bytes of the regular files in a tree, links not followed."""
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size if path.is_file() and not path.is_symlink() else 0
    return _walk_size(path)


def _walk_size(path: Path) -> int:
    """Bytes of the regular files below a folder (which may itself be reached through a link)."""
    total = 0
    for folder, _, files in os.walk(path):  # os.walk does not descend into linked folders
        for name in files:
            info = os.lstat(os.path.join(folder, name))
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


def _real_dirs(folder: Path) -> list[Path]:
    """The folders directly in `folder` that are folders themselves, not links to one."""
    try:
        return [Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


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
        """Every cached series folder (complete or not): SERVER/STUDY/SERIES folders, none reached through a link."""
        found = []
        for server in _real_dirs(self.root):
            for study in _real_dirs(server):
                for series in _real_dirs(study):
                    origin = series / ORIGIN_FILE
                    if origin.is_file() and not origin.is_symlink():
                        found.append(series)
        return found

    def incomplete(self) -> list[Path]:
        """Series folders holding fewer instances than the PACS listed (`pacs get` resumes them)."""
        return [d for d in self.series_dirs() if not (read_origin(d) or {}).get("complete")]

    def leftovers(self) -> list[Path]:
        """What retrievals of processes no longer running left behind."""
        if not self.root.is_dir():
            return []
        found = []
        studies = [study for server in _real_dirs(self.root) for study in _real_dirs(server)]
        for folder in studies + [series for study in studies for series in _real_dirs(study)]:
            for path in folder.glob(".*"):
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
            remove_inside(self.root, path)
        return len(found), freed

    def size(self) -> int:
        """Bytes the cache holds."""
        return _walk_size(self.root) if self.root.is_dir() else 0

    def touch(self, folder: Path) -> None:
        """Mark a series as just used (eviction goes by this time)."""
        now = time.time()
        os.utime(folder / ORIGIN_FILE, (now, now))

    def evict(self, keep: Iterable[Path] = ()) -> list[Path]:
        """Remove least recently used series until the cache fits its bound (never those in `keep`)."""
        kept = {Path(p).resolve() for p in keep}
        sizes = {d: _tree_size(d) for d in self.series_dirs()}
        total = self.size()
        removed = []
        for d in sorted(sizes, key=lambda d: (d / ORIGIN_FILE).stat().st_mtime):
            if total <= self.max_bytes:
                break
            if d.resolve() in kept:
                continue
            self._remove(d)
            total -= sizes[d]
            removed.append(d)
        return removed

    def _remove(self, series: Path) -> None:
        """Remove a series folder, and its study folder once it holds no other series; never through a link."""
        remove_inside(self.root, series)
        if not _real_dirs(series.parent):
            remove_inside(self.root, series.parent)

    def evict_one(self, keep: Iterable[Path]) -> int | None:
        """Remove the least recently used series not in `keep`; its bytes (None: nothing may go)."""
        kept = {Path(p).resolve() for p in keep}
        candidates = [d for d in self.series_dirs() if d.resolve() not in kept]
        if not candidates:
            return None
        oldest = min(candidates, key=lambda d: (d / ORIGIN_FILE).stat().st_mtime)
        size = _tree_size(oldest)
        self._remove(oldest)
        return size

    def clear(self) -> int:
        """Remove everything the cache holds; the bytes freed."""
        freed = self.size()
        if self.root.is_dir():
            for child in self.root.iterdir():
                remove_inside(self.root, child)  # a link is removed itself, never what it points to
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
