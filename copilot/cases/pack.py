"""Reading a case pack folder (`case.json`, `images/`, `hidden/`).

Only `case.json` and `images/` are given to a session; `hidden/` is read by scoring code alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("radiology", "pathology")


class CaseError(ValueError):
    """A folder is not a valid case pack."""


@dataclass(frozen=True)
class CasePack:
    root: Path
    case_id: str
    module: str
    inputs: dict[str, Any] = field(default_factory=dict)
    prompt: dict[str, Any] = field(default_factory=dict)
    kind: str = "radiology"  # the viewer kind: radiology (volumes) or pathology (a slide)


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
    if not isinstance(data["module"], str) or not data["module"]:
        raise CaseError(f"{path}: 'module' must be a module name")
    inputs = dict(data["inputs"])
    kind = data.get("kind", "pathology" if "slide" in inputs else "radiology")
    if kind not in KINDS:
        raise CaseError(f"{path}: unknown kind {kind!r}; expected one of {KINDS}")
    return CasePack(root, str(data["case_id"]), data["module"], inputs, dict(data.get("prompt", {})), kind)


def find_cases(root: str | Path) -> list[CasePack]:
    """Every case pack at or below `root` (a folder holding case.json, or folders of them)."""
    root = Path(root)
    if (root / "case.json").is_file():
        return [load_case(root)]
    return [load_case(p.parent) for p in sorted(root.glob("**/case.json"))]


def write_pack(
    case: Path, module: str, inputs: dict[str, Any], prompt: dict[str, Any], truth: dict[str, Any]
) -> Path:
    """Write `case.json` (what a session may read) and `hidden/truth.json` (what only scoring reads)."""
    case = Path(case)
    (case / "hidden").mkdir(parents=True, exist_ok=True)
    kind = "pathology" if "slide" in inputs else "radiology"
    meta = {"case_id": case.name, "module": module, "kind": kind, "inputs": inputs, "prompt": prompt}
    (case / "case.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    (case / "hidden" / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return case
