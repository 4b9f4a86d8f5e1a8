"""`medcopilot cases make`: deterministic case packs per module and seed.

Case i of a run uses seed `seed * 1000 + i`; each generator cycles its labels with that seed, so a
run of n ≥ (number of labels) cases covers every label. Sizes have module defaults (1 mm brains,
2.5 mm thorax, 4096 × 3072 px slides) and can be reduced for quick runs (tests use small ones).
"""

from __future__ import annotations

from pathlib import Path

from copilot.cases.brain import make_brain_case
from copilot.cases.longitudinal import make_longitudinal_case
from copilot.cases.lung import make_lung_case
from copilot.cases.pack import MODULES
from copilot.cases.wsi import make_breast_case, make_lymph_case

DEFAULT_SPACING = {"brain_mri": 1.0, "longitudinal_mri": 1.0, "lung_petct": 2.5}
DEFAULT_MPP = {"breast_wsi": 0.5, "lymph_node_wsi": 1.0}
AVAILABLE = MODULES


def make_case(
    module: str,
    out: Path,
    case_id: str,
    seed: int,
    spacing: float | None = None,
    slide_size: tuple[int, int] = (4096, 3072),
    mpp: float | None = None,
) -> Path:
    """One case pack of a module."""
    if module in DEFAULT_SPACING:
        sp = spacing or DEFAULT_SPACING[module]
        maker = {
            "brain_mri": make_brain_case,
            "longitudinal_mri": make_longitudinal_case,
            "lung_petct": make_lung_case,
        }[module]
        return maker(out, case_id, seed, spacing=sp)
    if module == "breast_wsi":
        return make_breast_case(out, case_id, seed, size=slide_size, mpp=mpp or DEFAULT_MPP[module])
    if module == "lymph_node_wsi":
        return make_lymph_case(out, case_id, seed, size=slide_size, mpp=mpp or DEFAULT_MPP[module])
    raise ValueError(f"unknown module {module!r}; choose from {MODULES}")


def make_cases(
    module: str,
    n: int,
    seed: int,
    out: Path,
    spacing: float | None = None,
    slide_size: tuple[int, int] = (4096, 3072),
    mpp: float | None = None,
) -> list[Path]:
    """Write `n` cases of a module (or of every module for 'all') under `out`."""
    if n < 1:
        raise ValueError("n must be at least 1")
    modules = MODULES if module == "all" else (module,)
    made: list[Path] = []
    for m in modules:
        if m not in MODULES:
            raise ValueError(f"unknown module {m!r}")
        for i in range(n):
            made.append(make_case(m, out, f"{m}_{seed:03d}_{i:04d}", seed * 1000 + i, spacing, slide_size, mpp))
    return made
