"""Where a result came from, kept with it: the code (version and git commit), the case pack (a digest of its
files), the prompt and tool schemas the model was given (digests), the price table and model profile versions,
the model snapshot the service said answered, and the decoding and reasoning settings sent. Stored in the result
row's `process.provenance`, so `results.sqlite` and every report carry it without a schema change."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

import copilot
from copilot.cases.pack import CasePack

PARTIAL_BYTES = 1 << 20  # files above PARTIAL_LIMIT are digested by their first and last MiB (and their size)
PARTIAL_LIMIT = 64 << 20
SOURCE_ROOT = Path(copilot.__file__).resolve().parent.parent


@lru_cache(maxsize=1)
def code_version() -> dict[str, Any]:
    """The package version and, in a git checkout, the commit and whether tracked files differ from it."""
    out: dict[str, Any] = {"version": copilot.__version__, "commit": None, "dirty": None}
    try:
        commit = subprocess.run(["git", "-C", str(SOURCE_ROOT), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()  # fmt: skip
        status = subprocess.run(["git", "-C", str(SOURCE_ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return out
    return {**out, "commit": commit or None, "dirty": bool(status.strip())}


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    size = path.stat().st_size
    with path.open("rb") as f:
        if size <= PARTIAL_LIMIT:
            for block in iter(lambda: f.read(PARTIAL_BYTES), b""):
                h.update(block)
        else:  # a whole-slide image of gigabytes: its size, head and tail
            h.update(f.read(PARTIAL_BYTES))
            f.seek(size - PARTIAL_BYTES)
            h.update(f.read(PARTIAL_BYTES))
    return h.hexdigest()


@lru_cache(maxsize=256)
def _case_digest(root: str, stamp: tuple[tuple[str, int, int], ...]) -> str:
    h = hashlib.sha256()
    for rel, size, _ in stamp:
        h.update(f"{rel}\0{size}\0{_file_digest(Path(root) / rel)}\n".encode())
    return h.hexdigest()


def case_digest(case: CasePack) -> str:
    """SHA-256 over every file of the case pack (hidden truth included, as scoring reads it): relative path, size
    and content (files over 64 MiB: their first and last MiB). Cached per file listing, sizes and mtimes."""
    root = Path(case.root)
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    stamp = tuple((p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return _case_digest(str(root), stamp)


def _safe_case_digest(case: CasePack) -> str | None:
    """The case digest, or None when a file of the pack cannot be read (provenance never fails an episode)."""
    try:
        return case_digest(case)
    except OSError:
        return None


def digest(value: Any) -> str:
    """SHA-256 of a value's canonical JSON."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def price_table_version() -> str | None:
    """The shipped price table's version, with the user's override named when MEDCOPILOT_PRICES is set."""
    from copilot.llm.prices import shipped_table

    version = shipped_table().get("version")
    override = os.environ.get("MEDCOPILOT_PRICES")
    return f"{version} + {Path(override).name}" if override else version


def episode_provenance(case: CasePack, events: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """One episode's provenance from its trace (`agent_start`'s profile, request and prompt digest, else the
    recorded task prompt's; each model turn's `model_version`) and the tools it was offered."""
    start = next((e for e in events if e.get("type") == "agent_start"), {})
    prompt = next((e for e in events if e.get("type") == "task_prompt"), None)
    snapshots = sorted({str(v) for e in events if e.get("type") == "model_turn" and (v := e.get("model_version"))})
    profile = start.get("profile") if isinstance(start.get("profile"), dict) else None
    return {
        "code": code_version(),
        "case_digest": _safe_case_digest(case),
        "prompt_sha256": start.get("prompt_sha256")
        or (hashlib.sha256((prompt.get("system", "") + prompt.get("user", "")).encode()).hexdigest()
            if prompt else None),
        "prompt_template_sha256": _template_digest(case, events),
        "tool_schema_sha256": digest(tools) if tools else None,
        "price_table": price_table_version(),
        "profile": {"id": profile.get("id"), "version": profile.get("version")} if profile else None,
        "model_snapshots": snapshots,
        "request": start.get("request"),
    }


def _template_digest(case: CasePack, events: list[dict[str, Any]]) -> str | None:
    """SHA-256 of the prompt templates the task was filled from (system and task, under the run's protocol): the
    same for every case of a configuration, where the filled prompt's digest differs by case."""
    from copilot.agent.prompts import template

    header = next((e for e in events if e.get("type") == "episode_start"), {})
    protocol = header.get("protocol")
    own = f"{case.module}_system"
    try:
        try:
            system = template(own, protocol) if protocol == "paper" else template(f"{case.kind}_system", protocol)
        except FileNotFoundError:
            system = template(f"{case.kind}_system", protocol)
        return digest([system, template(case.module, protocol)])
    except FileNotFoundError:
        return None


def session_tools(session: Any) -> list[dict[str, Any]]:
    """The tool declarations a session offers on its track, as a model is given them (name, description, schema)."""
    return [{"name": s.name, "description": s.description, "parameters": s.parameters_schema()}
            for s in session.registry.specs(session.track)]  # fmt: skip
