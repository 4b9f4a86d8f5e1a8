"""Policies beyond the offline ones in `policy.py` (model-driven agents, baselines) are looked up here."""

from __future__ import annotations

from typing import Any


def make(spec: str) -> Any:
    raise ValueError(f"unknown policy {spec!r}; use prior or scripted:FILE")
