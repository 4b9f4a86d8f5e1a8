"""Patient data on disk is the user's alone: every folder the app makes for sessions, traces, images, reports, the
PACS cache and exports is created 0700 and every file 0600, whatever the process umask, and a secrets file that
others may read is refused with the `chmod` that fixes it.

Files are opened with the owner-only mode from the start (never written first and narrowed after), so no other
local user can open one while it is being written. No link is followed: a file is opened under its folder's
descriptor (itself opened without following a link) with `O_NOFOLLOW`, and a symlink or a hard-linked file at the
path is refused (`LinkedPathError`) before a byte is written; a folder asked for that is a symlink is refused too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class ExposedSecretsError(PermissionError):
    """A file holding credentials is readable or writable by other local users."""


class LinkedPathError(PermissionError):
    """A path the app would write or remove is a symlink or a hard-linked file: it is not followed."""


def _refuse(path: str | Path, what: str) -> LinkedPathError:
    return LinkedPathError(f"{path}: {what}; MedCopilot does not write through links (remove it and try again)")


def private_dir(path: str | Path) -> Path:
    """Create `path` and the missing folders above it, each 0700; a folder that exists already and is owned
    by this user is narrowed to 0700 only when it is the one asked for. A symlink there is refused."""
    folder = Path(path)
    missing: list[Path] = []
    probe = folder
    while not os.path.lexists(probe):
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for part in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by another thread or process meanwhile
            part.mkdir(mode=DIR_MODE)
        _chmod_nofollow(part, DIR_MODE, directory=True)
    if folder.is_symlink():
        raise _refuse(folder, "a symlink where a private folder belongs")
    if not missing and folder.is_dir() and _owned(folder):
        _chmod_nofollow(folder, DIR_MODE, directory=True)
    return folder


def _chmod_nofollow(path: str | Path, mode: int, directory: bool = False) -> None:
    """chmod through a descriptor opened without following a link (a link is refused, never its target changed)."""
    flags = os.O_RDONLY | _NOFOLLOW | (_DIRECTORY if directory else os.O_NONBLOCK)
    try:
        fd = os.open(str(path), flags)
    except OSError as exc:
        if os.path.islink(path):
            raise _refuse(path, "a symlink") from None
        if isinstance(exc, PermissionError):  # a file of ours we may not read (0200): its own mode changed
            os.chmod(path, mode)
            return
        raise
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _owned(path: Path) -> bool:
    try:
        return path.stat().st_uid == os.getuid()
    except (OSError, AttributeError):
        return False


def open_private(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> IO[Any]:
    """A file opened for writing (`w`, `a`, `wb`, `ab`, `x`, `xb`), created 0600 (an existing one narrowed to 0600);
    its folder must exist. Neither the file nor its folder may be a symlink, nor the file hard-linked
    (`LinkedPathError`; nothing written, an existing file not truncated). Use it as a context manager or keep it
    open."""
    target = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW
    if mode.startswith("a"):
        flags |= os.O_APPEND
    elif mode.startswith("x"):
        flags |= os.O_EXCL
    try:
        folder = os.open(str(target.parent), os.O_RDONLY | _DIRECTORY | _NOFOLLOW)
    except OSError:
        if target.parent.is_symlink():
            raise _refuse(target.parent, "a symlink where a private folder belongs") from None
        raise
    try:
        fd = os.open(target.name, flags, FILE_MODE, dir_fd=folder)
    except OSError:
        if target.is_symlink():
            raise _refuse(target, "a symlink where a file would be written") from None
        raise
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            raise _refuse(target, "a hard-linked file" if info.st_nlink > 1 else "not a regular file")
        os.fchmod(fd, FILE_MODE)
        if mode.startswith("w"):
            os.ftruncate(fd, 0)  # only now: a refused link keeps its contents
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
    """Narrow what a library wrote itself: a file to 0600, a folder and everything under it to 0700/0600. Links
    inside a folder are left alone (their targets never changed); `path` itself being a link is refused."""
    root = Path(path)
    if root.is_symlink():
        raise _refuse(root, "a symlink")
    if root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root):  # os.walk does not descend into linked folders
            _chmod_nofollow(dirpath, DIR_MODE, directory=True)
            for name in filenames:
                entry = os.path.join(dirpath, name)
                if not os.path.islink(entry):
                    _chmod_nofollow(entry, FILE_MODE)
            dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    elif root.exists():
        _chmod_nofollow(root, FILE_MODE)
    return root


def remove_inside(root: str | Path, path: str | Path) -> list[str]:
    """Remove `path` (a file, a link or a folder tree) below the folder `root` without following any link: each
    folder on the way is opened under the one above it with `O_NOFOLLOW`, a link is removed itself (never its
    target), a tree is removed through descriptors. What could not be removed, in words (the rest is removed)."""
    base, target = Path(root), Path(path)
    try:
        parts = target.relative_to(base).parts
    except ValueError:
        return [f"{target}: not inside {base}; left in place"]
    if not parts:
        return [f"{target}: the folder itself; left in place"]
    problems: list[str] = []
    try:
        fd = os.open(str(base), os.O_RDONLY | _DIRECTORY)
    except OSError as exc:
        return [f"{base}: {exc.strerror or exc}"]
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=fd)
            except OSError:
                return [f"{target}: a link or no folder on the way ({part}); left in place"]
            os.close(fd)
            fd = inner
        name = parts[-1]
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return []
        try:
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(name, dir_fd=fd, onerror=lambda _f, p, e: problems.append(f"{target.parent / p}: {e[1]}"))
            else:
                os.unlink(name, dir_fd=fd)  # a file, or a link itself
        except OSError as exc:
            problems.append(f"{target}: {exc.strerror or exc}")
    finally:
        os.close(fd)
    return problems


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
