"""Locating the project's `resources/` folder (prompts, scripts; `$MEDCOPILOT_RESOURCES` overrides it) and the prompt
templates modules and kinds declare themselves."""

from __future__ import annotations

import os
from pathlib import Path


def resources_dir() -> Path:
    env = os.environ.get("MEDCOPILOT_RESOURCES")
    path = Path(env) if env else Path(__file__).resolve().parent.parent / "resources"
    if not path.is_dir():
        raise FileNotFoundError(f"resources folder not found at {path}; set MEDCOPILOT_RESOURCES")
    return path


_PROMPTS: dict[str, str | Path] = {}  # prompt templates their owners declare: a module's task, a kind's system


def declare_prompt(name: str, source: str | Path) -> None:
    """Make a template available by name: its text, or the file holding it (a plug-in keeps it in its own folder,
    so it needs no file under `resources/prompts/`)."""
    _PROMPTS[name] = source


def prompt_template(name: str) -> str | None:
    """A declared template's text, else `resources/prompts/NAME.txt`'s, else None."""
    source = _PROMPTS.get(name)
    if isinstance(source, Path):
        return source.read_text(encoding="utf-8")
    if source:
        return source
    path = resources_dir() / "prompts" / f"{name}.txt"
    return path.read_text(encoding="utf-8") if path.is_file() else None
