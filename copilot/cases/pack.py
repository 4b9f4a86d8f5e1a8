"""Reading a case pack folder (`case.json`, `images/`, `hidden/`).

Only `case.json` and `images/` are given to a session; `hidden/` is read by scoring code alone.
Case packs may come from third-party adapters, so every field is checked here: the case id is a
plain name (it becomes a folder name in benchmark runs), and every input path is relative, inside the
case folder, outside `hidden/` and free of `..` before anything reads, writes or deletes by it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from copilot import plugins
from copilot.kind_names import PATHOLOGY, RADIOLOGY

CASE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class CaseError(ValueError):
    """A folder is not a valid case pack."""


class CaseLike(Protocol):
    """What a session needs of what it opens: a case pack, or any study a clinician brings."""

    @property
    def root(self) -> Path: ...
    @property
    def case_id(self) -> str: ...
    @property
    def module(self) -> str: ...  # "" for a study that belongs to no benchmark module
    @property
    def kind(self) -> str: ...
    @property
    def inputs(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class CasePack:
    """A benchmark case pack as read from its folder (hidden/ never read here)."""

    root: Path
    case_id: str
    module: str
    inputs: dict[str, Any] = field(default_factory=dict)
    prompt: dict[str, Any] = field(default_factory=dict)
    kind: str = "radiology"  # the viewer kind: radiology (volumes), pathology (a slide) or a plug-in's


def check_case_id(case_id: object, where: str = "case_id") -> str:
    """A case id usable as one folder name: letters, digits, `.`, `_`, `-`; no separators, no `..`."""
    if not isinstance(case_id, str) or not CASE_ID_RE.match(case_id) or ".." in case_id:
        raise CaseError(
            f"{where}: expected a plain name of letters, digits, '.', '_' or '-' (at most 128, no '..'), "
            f"got {str(case_id)[:80]!r}"
        )
    return case_id


def check_relative_path(value: object, where: str) -> str:
    """A path given by case data: relative, no `..`, not into `hidden/`, no NUL."""
    if not isinstance(value, str) or not value.strip():
        raise CaseError(f"{where}: expected a relative path string, got {type(value).__name__}")
    if "\x00" in value or os.path.isabs(value) or value.startswith(("/", "\\")):
        raise CaseError(f"{where}: {value[:80]!r} must be a path relative to the case folder")
    parts = re.split(r"[\\/]+", value)
    if ".." in parts:
        raise CaseError(f"{where}: {value[:80]!r} must not contain '..'")
    if parts[0] == "hidden" or (parts[0] == "." and len(parts) > 1 and parts[1] == "hidden"):
        raise CaseError(f"{where}: {value[:80]!r} points into hidden/")
    return value


def _check_inputs(inputs: object, path: Path) -> dict[str, Any]:
    if not isinstance(inputs, dict):
        raise CaseError(f"{path}: 'inputs' must be an object, got {type(inputs).__name__}")
    volumes = inputs.get("volumes")
    if volumes is not None:
        if not isinstance(volumes, list):
            raise CaseError(f"{path}: inputs.volumes must be a list of paths, got {type(volumes).__name__}")
        for n, v in enumerate(volumes):
            check_relative_path(v, f"{path}: inputs.volumes[{n}]")
    if inputs.get("slide") is not None:
        check_relative_path(inputs["slide"], f"{path}: inputs.slide")
    for key in ("default_volume", "image_type"):
        if key in inputs and not isinstance(inputs[key], str):
            raise CaseError(f"{path}: inputs.{key} must be a string, got {type(inputs[key]).__name__}")
    if "accept_missing_geometry" in inputs and not isinstance(inputs["accept_missing_geometry"], bool):
        raise CaseError(f"{path}: inputs.accept_missing_geometry must be true or false")
    return dict(inputs)


def load_case(case_dir: str | Path) -> CasePack:
    """Parse `case.json` of a case folder and check its fields (CaseError names the file and field)."""
    root = Path(case_dir).resolve()
    path = root / "case.json"
    if not path.is_file():
        raise CaseError(f"{root} has no case.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise CaseError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise CaseError(f"{path}: invalid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise CaseError(f"{path}: expected a JSON object, got {type(data).__name__}")
    for key in ("case_id", "module", "inputs"):
        if key not in data:
            raise CaseError(f"{path}: missing {key!r}")
    case_id = check_case_id(data["case_id"], f"{path}: case_id")
    if not isinstance(data["module"], str) or not data["module"]:
        raise CaseError(f"{path}: 'module' must be a module name, got {str(data['module'])[:80]!r}")
    inputs = _check_inputs(data["inputs"], path)
    kind = data.get("kind", PATHOLOGY if "slide" in inputs else RADIOLOGY)
    known = known_kinds()
    if not isinstance(kind, str) or kind not in known:
        raise CaseError(f"{path}: unknown kind {str(kind)[:40]!r}; expected one of {', '.join(sorted(known))}")
    prompt = data.get("prompt", {})
    if not isinstance(prompt, dict):
        raise CaseError(f"{path}: 'prompt' must be an object, got {type(prompt).__name__}")
    return CasePack(root, case_id, data["module"], inputs, dict(prompt), kind)


def known_kinds() -> set[str]:
    """The viewer kinds a pack may name: the core's, the installed plug-ins' and those registered in-process (read
    from the entry points' names; no plug-in is imported to check a pack)."""
    return {RADIOLOGY, PATHOLOGY} | plugins.names(plugins.KINDS_GROUP)


def _pack_folders(root: Path) -> list[Path]:
    """Folders holding case.json at or below `root`, symbolic links to folders followed (each real folder
    visited once, so a link loop ends); a pack's own sub-folders are not searched."""
    found: list[Path] = []
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        dirnames.sort()
        if "case.json" in filenames and Path(dirpath) != root:
            found.append(Path(dirpath))
            dirnames[:] = []
    return sorted(found)


def find_cases(root: str | Path, problems: list[str] | None = None) -> list[CasePack]:
    """Every case pack at or below `root` (a folder holding case.json, or folders of them).

    With `problems`, an invalid pack is described there and skipped; without, the first one raises CaseError.
    Two packs with the same case id are a problem too (results and traces are keyed by it).
    """
    root = Path(root)
    if not root.is_dir():
        raise CaseError(f"{root}: no such folder")
    folders = [root] if (root / "case.json").is_file() else _pack_folders(root)
    cases: list[CasePack] = []
    seen: dict[str, Path] = {}
    for folder in folders:
        try:
            case = load_case(folder)
            if case.case_id in seen:
                raise CaseError(f"{folder}: case_id {case.case_id!r} is also used by {seen[case.case_id]}")
        except CaseError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
            continue
        seen[case.case_id] = folder
        cases.append(case)
    return cases


def write_pack(
    case: Path,
    module: str,
    inputs: dict[str, Any],
    prompt: dict[str, Any],
    truth: dict[str, Any],
    kind: str | None = None,
) -> Path:
    """Write `case.json` (what a session may read) and `hidden/truth.json` (what only scoring reads); the kind is
    pathology for a slide and radiology otherwise unless named (a plug-in's)."""
    case = Path(case)
    (case / "hidden").mkdir(parents=True, exist_ok=True)
    kind = kind or (PATHOLOGY if "slide" in inputs else RADIOLOGY)
    meta = {"case_id": case.name, "module": module, "kind": kind, "inputs": inputs, "prompt": prompt}
    (case / "case.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    (case / "hidden" / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return case
