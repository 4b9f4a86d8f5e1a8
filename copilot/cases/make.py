"""`medcopilot cases make`: deterministic case packs per module and seed."""

from __future__ import annotations

from pathlib import Path

from copilot.cases.brain import make_brain_case
from copilot.cases.pack import MODULES

AVAILABLE = ("brain_mri",)


def make_cases(module: str, n: int, seed: int, out: Path, spacing: float = 1.0) -> list[Path]:
    """Write `n` cases of a module (or of every available module for 'all') under `out`."""
    if n < 1:
        raise ValueError("n must be at least 1")
    modules = AVAILABLE if module == "all" else (module,)
    made: list[Path] = []
    for m in modules:
        if m not in MODULES:
            raise ValueError(f"unknown module {m!r}")
        if m not in AVAILABLE:
            raise NotImplementedError(f"case generation for {m} is not available yet (available: {AVAILABLE})")
        for i in range(n):
            case_seed = seed * 1000 + i
            made.append(make_brain_case(out, f"{m}_{seed:03d}_{i:04d}", case_seed, spacing=spacing))
    return made
