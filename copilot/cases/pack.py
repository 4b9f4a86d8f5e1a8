"""Reading a case pack folder (`case.json`, `images/`, `hidden/`).

Only `case.json` and `images/` are given to a session; `hidden/` is read by scoring code alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODULES = ("brain_mri", "longitudinal_mri", "lung_petct", "breast_wsi", "lymph_node_wsi")
RADIOLOGY_MODULES = ("brain_mri", "longitudinal_mri", "lung_petct")


class CaseError(ValueError):
    """A folder is not a valid case pack."""


@dataclass(frozen=True)
class CasePack:
    root: Path
    case_id: str
    module: str
    inputs: dict[str, Any] = field(default_factory=dict)
    prompt: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return "radiology" if self.module in RADIOLOGY_MODULES else "pathology"


def load_case(case_dir: str | Path) -> CasePack:
    """Parse `case.json` of a case folder and check its fields."""
    root = Path(case_dir).resolve()
    path = root / "case.json"
    if not path.is_file():
        raise CaseError(f"{root} has no case.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CaseError(f"{path}: invalid JSON ({exc})") from exc
    for key in ("case_id", "module", "inputs"):
        if key not in data:
            raise CaseError(f"{path}: missing {key!r}")
    if data["module"] not in MODULES:
        raise CaseError(f"{path}: unknown module {data['module']!r}")
    return CasePack(root, str(data["case_id"]), data["module"], dict(data["inputs"]), dict(data.get("prompt", {})))
