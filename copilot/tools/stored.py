"""What a session has stored already, by content digest (`derived/stored.json`, owner-only): an export whose content
was written before is refused by name instead of writing a second copy under new UIDs."""

from __future__ import annotations

import json
from pathlib import Path

from copilot.errors import HandlerError
from copilot.privatefs import private_dir, write_private

LEDGER = "stored.json"


def _ledger(folder: Path) -> dict[str, str]:
    path = folder / LEDGER
    return dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else {}


def check_not_stored(folder: Path | None, digest: str, what: str) -> None:
    """Refuse (`already_stored`, nothing written) when this content was written before and its file is still there."""
    if folder is None:
        return
    name = _ledger(folder).get(digest)
    if name and (folder / name).exists():
        raise HandlerError("already_stored", f"{what} with the same content is stored already as {name}; "
                           "nothing written again", status=409)  # fmt: skip


def remember(folder: Path, digest: str, name: str) -> None:
    """Note that `name` in the derived folder holds the content of `digest`."""
    private_dir(folder)
    ledger = _ledger(folder)
    ledger[digest] = name
    write_private(folder / LEDGER, json.dumps(ledger, indent=1, sort_keys=True) + "\n")
