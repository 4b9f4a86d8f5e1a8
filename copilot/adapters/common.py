"""Helpers shared by the dataset adapters: writing a case pack around source files.

Source images are linked file by file into `images/` (symbolic links: no copy of large data; the
viewer's path rules allow exactly this) or copied with `copy=True`. Ground truth goes to `hidden/`.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any


def place(src: Path, dst: Path, copy: bool) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    if copy:
        shutil.copy2(src, dst)
    else:
        dst.symlink_to(src.resolve())


def write_pack(case: Path, module: str, inputs: dict[str, Any], prompt: dict[str, Any], truth: dict[str, Any]) -> Path:
    (case / "hidden").mkdir(parents=True, exist_ok=True)
    meta = {"case_id": case.name, "module": module, "inputs": inputs, "prompt": prompt}
    (case / "case.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    (case / "hidden" / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return case


def digits(text: str) -> int | None:
    """The last number in an identifier ('UCSF-PDGM-0004' and 'UCSF-PDGM-004' both give 4)."""
    found = re.findall(r"\d+", text)
    return int(found[-1]) if found else None


def norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()
