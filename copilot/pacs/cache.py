"""The local cache of retrieved series: bounded in size, least recently opened series evicted first.

Location: `MEDCOPILOT_PACS_CACHE`, else `$XDG_CACHE_HOME/medcopilot/pacs` (default `~/.cache/medcopilot/pacs`).
Bound: `MEDCOPILOT_PACS_CACHE_MB` MiB (default 4096). Layout: `SERVER/STUDY/SERIES/00001.dcm…`, where
each folder name is a short hash (no UID or host appears in a path a viewer or a model might show), and each
study and series folder holds `origin.json` (service root and UIDs; never credentials).
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
        """Every complete cached series folder."""
        return [p.parent for p in self.root.glob(f"*/*/*/{ORIGIN_FILE}")]

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

    def clear(self) -> int:
        """Remove everything the cache holds; the bytes freed."""
        freed = self.size()
        if self.root.is_dir():
            for child in self.root.iterdir():
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
        return freed
