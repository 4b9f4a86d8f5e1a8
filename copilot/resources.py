"""Locating the project's `resources/` folder (prompts, scripts); `$MEDCOPILOT_RESOURCES` overrides it."""

from __future__ import annotations

import os
from pathlib import Path


def resources_dir() -> Path:
    env = os.environ.get("MEDCOPILOT_RESOURCES")
    path = Path(env) if env else Path(__file__).resolve().parent.parent / "resources"
    if not path.is_dir():
        raise FileNotFoundError(f"resources folder not found at {path}; set MEDCOPILOT_RESOURCES")
    return path
