"""Helpers shared by the dataset adapters: writing a case pack around source files.

Source images are linked file by file into `images/` (symbolic links: no copy of large data; the
viewer's path rules allow exactly this) or copied with `copy=True`. Ground truth goes to `hidden/`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from copilot.cases.pack import write_pack

__all__ = ["digits", "norm", "place", "write_pack"]


def place(src: Path, dst: Path, copy: bool) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    if copy:
        shutil.copy2(src, dst)
    else:
        dst.symlink_to(src.resolve())


def digits(text: str) -> int | None:
    """The last number in an identifier ('UCSF-PDGM-0004' and 'UCSF-PDGM-004' both give 4)."""
    found = re.findall(r"\d+", text)
    return int(found[-1]) if found else None


def norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()
