"""Confinement of every file a case makes the viewer open: the path given, and each file that it names.

One resolver decides for all loaders. A path is normalised lexically first (no links followed): it must
lie in the case folder and outside `hidden/`. Followed to its target (symbolic links at any depth), it
must still not reach `hidden/`, and may leave the case folder only as a symbolic link to a regular file
placed directly (no linked folders on the way) under `images/`: how dataset adapters reference large
source images without copying them. Targets in the kernel's virtual file systems (`/proc`, `/sys`,
`/dev`) and anything that is not a regular file or folder (a FIFO would block the reader) are refused
everywhere, with or without a case folder.

References inside files follow the same rule, resolved as the readers resolve them: relative to the
folder of the referring path as given (NRRD `data file`, MetaImage `ElementDataFile`, in their single,
`LIST` and printf-pattern forms; Analyze/NIfTI `.hdr`/`.img` pairs; the members of a DICOM folder;
MIRAX and Hamamatsu VMS data files). The case folder in force is set per handler call by the session
(`case_folder`); loaders call `check_sources` before any reader opens the file.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from copilot.errors import HandlerError

CODE = "path_outside_case"
SPECIAL_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
MAX_REFERENCES = 10_000  # files one header may name (a printf pattern or a LIST)
_ROOT: contextvars.ContextVar[Path | None] = contextvars.ContextVar("case_root", default=None)


class OutsideCase(HandlerError):
    """A path (or a file a header names) that leads outside the case folder or into its hidden part."""

    def __init__(self, message: str) -> None:
        super().__init__(CODE, message)


@contextlib.contextmanager
def case_folder(root: Path | None) -> Iterator[None]:
    """Confine every load made inside the block (in this thread or task) to `root` (None: only the
    always-refused places)."""
    token = _ROOT.set(root.resolve() if root is not None else None)
    try:
        yield
    finally:
        _ROOT.reset(token)


def current_root() -> Path | None:
    """The case folder loads are confined to now (None outside a handler call)."""
    return _ROOT.get()


def within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _special(target: Path) -> bool:
    return any(within(target, r) for r in SPECIAL_ROOTS)


def confine(root: Path, path: str | os.PathLike[str], shown: str | None = None) -> Path:
    """`path` (relative to `root`, or absolute) checked against the case folder; returned normalised, links
    not followed, so that volumes keep the names the case gives them. May raise OSError from the file system."""
    text = os.fspath(path)
    label = repr((shown if shown is not None else text)[:200])
    if "\x00" in text:
        raise OutsideCase("invalid path")
    root = root.resolve()
    candidate = Path(text)
    lexical = Path(os.path.normpath(candidate if candidate.is_absolute() else root / candidate))
    hidden = root / "hidden"
    if not within(lexical, root):
        raise OutsideCase(f"{label} is outside the case folder")
    if within(lexical, hidden):
        raise OutsideCase(f"{label} is not available to the viewer")
    target = lexical.resolve()
    if within(target, hidden.resolve()):
        raise OutsideCase(f"{label} is not available to the viewer")
    if _special(target):
        raise OutsideCase(f"{label} leads to a system file")
    if not within(target, root):
        file_link = lexical.is_symlink() and target.is_file() and lexical.parent.resolve() == lexical.parent
        if not (file_link and within(lexical, root / "images")):
            raise OutsideCase(f"{label} leads outside the case folder")
    _regular(target, label)
    return lexical


def _regular(target: Path, label: str) -> None:
    """Refuse devices, FIFOs and sockets (an existing path only; a missing one is the reader's not_found)."""
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise OutsideCase(f"{label} is not a regular file")


def check_file(path: Path) -> Path:
    """A path a loader is about to open, checked against the case folder in force (or, without one, against the
    always-refused places)."""
    root = current_root()
    if root is not None:
        return confine(root, path if path.is_absolute() else Path.cwd() / path, shown=path.name)
    target = path.resolve()
    if _special(target):
        raise OutsideCase(f"{path.name!r} leads to a system file")
    _regular(target, repr(path.name))
    return path


def check_reference(referrer: Path, reference: str) -> Path:
    """A file named inside `referrer` (relative to the referrer's folder as given), checked like a path."""
    if "\x00" in reference:
        raise OutsideCase(f"{referrer.name} names an invalid path")
    ref = Path(reference)
    target = ref if ref.is_absolute() else referrer.parent / ref
    root = current_root()
    if root is not None:
        shown = f"{referrer.name} → {reference}"
        return confine(root, target if target.is_absolute() else Path.cwd() / target, shown=shown)
    resolved = target.resolve()
    if _special(resolved):
        raise OutsideCase(f"{referrer.name} names a system file ({reference[:100]!r})")
    _regular(resolved, repr(reference[:100]))
    return target


def check_sources(path: Path, references: list[str]) -> None:
    """Refuse a volume, series folder or slide whose own path, or any file it names (`references`, as written in
    it), leads outside the case; a folder's members are checked one by one."""
    check_file(path)
    if path.is_dir():
        for child in sorted(path.iterdir()):
            if not child.name.startswith("."):
                check_file(child)
        return
    for ref in references[:MAX_REFERENCES]:
        check_reference(path, ref)
