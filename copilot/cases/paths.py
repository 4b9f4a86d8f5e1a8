"""Where a case's input paths lead: the one resolver handlers, montages and audit pages share."""

from __future__ import annotations

from pathlib import Path

from copilot.engine.confine import confine
from copilot.errors import HandlerError


def case_path(case_root: Path | None, path: str) -> Path:
    """A path inside the case folder, never in (or linked into) its hidden/ part; returned as given
    (normalised, links not followed) so that volumes keep the names the case gives them.

    The path is first normalised lexically (no symlinks followed): it must lie in the case folder and
    outside hidden/. Followed to its target, it must still not reach hidden/, and may leave the case
    folder only as a symbolic link to a file, placed directly (no linked folders on the way) under
    images/: how dataset adapters reference large source images without copying them.
    """
    if case_root is None:
        raise HandlerError("no_case_root", "this viewer has no case root; paths cannot be opened")
    if len(path) > 4096 or any(len(part.encode("utf-8", "replace")) > 255 for part in Path(path).parts):
        raise HandlerError("not_found", f"{path[:80]!r}…: path or file name too long")
    try:
        lexical = confine(case_root, path)
        exists = lexical.resolve().exists()
    except OSError as exc:  # unreadable folder, link loop, name the file system refuses
        raise HandlerError("not_found", f"{path[:200]!r} cannot be opened: {exc.strerror or exc}") from None
    if not exists:
        raise HandlerError("not_found", f"{path!r} does not exist in the case folder")
    return lexical
