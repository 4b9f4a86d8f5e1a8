"""Bootstrap intervals of the report's cells: percentile bootstrap over cases, from a seeded generator, so a
report is reproducible (`BOOTSTRAP` resamples, seed `BOOTSTRAP_SEED`)."""

from __future__ import annotations

import numpy as np

BOOTSTRAP = 2000
BOOTSTRAP_SEED = 20260


def bootstrap_means(per_case: list[float], n_boot: int = BOOTSTRAP, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Means of `n_boot` resamples (with replacement) of the per-case values, from a seeded generator."""
    values = np.asarray(per_case, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(values), size=(n_boot, len(values)))
    return values[idx].mean(axis=1)


def bootstrap_ci(
    per_case: list[float], n_boot: int = BOOTSTRAP, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float] | None:
    """95 % percentile interval of the mean over cases (None for fewer than two cases)."""
    if len(per_case) < 2:
        return None
    means = bootstrap_means(per_case, n_boot, seed)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def delta_ci(a: list[float], b: list[float]) -> tuple[float, float] | None:
    """95 % interval of mean(a) − mean(b), both sides resampled over their cases (independent streams)."""
    if len(a) < 2 or len(b) < 2:
        return None
    diff = bootstrap_means(a, seed=BOOTSTRAP_SEED) - bootstrap_means(b, seed=BOOTSTRAP_SEED + 1)
    return float(np.percentile(diff, 2.5)), float(np.percentile(diff, 97.5))
