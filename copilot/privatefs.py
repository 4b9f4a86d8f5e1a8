"""Patient data on disk is the user's alone: every folder the app makes for sessions, traces, images, reports, the
PACS cache and exports is created 0700 and every file 0600, whatever the process umask, and a secrets file that
others may read is refused with the `chmod` that fixes it.

Files are opened with the owner-only mode from the start (never written first and narrowed after), so no other
local user can open one while it is being written.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600


class ExposedSecretsError(PermissionError):
    """A file holding credentials is readable or writable by other local users."""


def private_dir(path: str | Path) -> Path:
    """Create `path` and the missing folders above it, each 0700; a folder that exists already and is owned
    by this user is narrowed to 0700 only when it is the one asked for."""
    folder = Path(path)
    missing: list[Path] = []
    probe = folder
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for part in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by another thread or process meanwhile
            part.mkdir(mode=DIR_MODE)
        os.chmod(part, DIR_MODE)
    if not missing and folder.is_dir() and _owned(folder):
        os.chmod(folder, DIR_MODE)
    return folder


def _owned(path: Path) -> bool:
    try:
        return path.stat().st_uid == os.getuid()
    except (OSError, AttributeError):
        return False


def open_private(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> IO[Any]:
    """A file opened for writing (`w`, `a`, `wb`, `ab`, `x`, `xb`), created 0600 (an existing one narrowed to 0600);
    its folder must exist. Use it as a context manager or keep it open."""
    flags = os.O_WRONLY | os.O_CREAT
    if mode.startswith("a"):
        flags |= os.O_APPEND
    elif mode.startswith("x"):
        flags |= os.O_EXCL
    else:
        flags |= os.O_TRUNC
    fd = os.open(str(path), flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    binary = "b" in mode
    return os.fdopen(fd, mode.replace("x", "w"), encoding=None if binary else encoding)


def write_private(path: str | Path, data: bytes | str, encoding: str = "utf-8") -> Path:
    """Write a whole file owner-only (0600); returns its path."""
    out = Path(path)
    if isinstance(data, bytes):
        with open_private(out, "wb") as fh:
            fh.write(data)
    else:
        with open_private(out, "w", encoding) as fh:
            fh.write(data)
    return out


def make_private(path: str | Path) -> Path:
    """Narrow what a library wrote itself: a file to 0600, a folder and everything under it to 0700/0600."""
    root = Path(path)
    if root.is_dir():
        for dirpath, _, filenames in os.walk(root):
            os.chmod(dirpath, DIR_MODE)
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), FILE_MODE)
    elif root.exists():
        os.chmod(root, FILE_MODE)
    return root


def exposed(path: str | Path) -> bool:
    """Whether a file may be read or written by group or others."""
    return bool(Path(path).stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def check_secret_file(path: str | Path, what: str = "file") -> None:
    """Refuse a credentials file that group or others may read (ExposedSecretsError naming the command to run)."""
    p = Path(path)
    if os.name == "posix" and exposed(p):
        mode = stat.S_IMODE(p.stat().st_mode)
        raise ExposedSecretsError(
            f"{p}: this {what} holds secrets but other users may read it (mode {mode:04o}); "
            f"run `chmod 600 {p}` and try again"
        )
