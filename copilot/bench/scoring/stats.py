"""Bootstrap intervals of the report's cells: percentile bootstrap over cases, from a seeded generator, so a
report is reproducible (`BOOTSTRAP` resamples, seed `BOOTSTRAP_SEED`). A change between two runs of the same
cases resamples the cases jointly (the paired difference per case); a mean of cells averages their resampled
means, each cell's stream seeded by its own cases."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable

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


def case_seed(case_ids: Iterable[str]) -> int:
    """The seed of a cell's resampling stream: `BOOTSTRAP_SEED` plus a checksum of its sorted case ids, so cells
    over other cases draw independently and a report stays reproducible."""
    return BOOTSTRAP_SEED + zlib.crc32("\n".join(sorted(case_ids)).encode())


def delta_ci(a: dict[str, float], b: dict[str, float]) -> tuple[float, float] | None:
    """Paired bootstrap: 95 % interval of the mean of a − b over the cases both hold (per-case values), the
    cases resampled jointly, so identical runs give [0, 0]; None for fewer than two common cases."""
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return None
    diff = bootstrap_means([a[c] - b[c] for c in common], seed=case_seed(common))
    return float(np.percentile(diff, 2.5)), float(np.percentile(diff, 97.5))


def mean_ci(boots: list[np.ndarray], cases: int) -> tuple[float, float] | None:
    """95 % interval of a mean of cells from their resampled means (None for fewer than two cases in all)."""
    if not boots or cases < 2:
        return None
    means = np.mean(np.stack(boots), axis=0)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def mean(values: list[float]) -> float | None:
    """The mean of the values, None for none (a cell with nothing behind it is empty, never zero)."""
    return sum(values) / len(values) if values else None


def pass_at_k(successes: int, runs: int, k: int) -> float:
    """Pass@k, the unbiased estimator from n ≥ k runs with c successes (Chen et al. 2021, "Evaluating Large
    Language Models Trained on Code"): 1 − C(n − c, k) / C(n, k), the chance that k of the n runs drawn without
    replacement hold a success. Fewer runs than k are refused (the plug-in 1 − (1 − c/n)^k is biased low)."""
    _check_runs(successes, runs, k)
    return 1.0 - math.comb(runs - successes, k) / math.comb(runs, k)


def pass_hat_k(successes: int, runs: int, k: int) -> float:
    """pass^k (Yao et al. 2024, τ-bench): C(c, k) / C(n, k), the chance that k runs drawn without replacement
    all succeed — reliability, where Pass@k is reach. Fewer runs than k are refused."""
    _check_runs(successes, runs, k)
    return math.comb(successes, k) / math.comb(runs, k)


def _check_runs(successes: int, runs: int, k: int) -> None:
    if k < 1 or runs < k:
        raise ValueError(f"Pass@{k} needs at least {k} runs of a case; it has {runs}")
    if not 0 <= successes <= runs:
        raise ValueError(f"{successes} successes out of {runs} runs")


def sign_flip_p(diffs: list[float], n_perm: int = 10_000, seed: int = BOOTSTRAP_SEED) -> float | None:
    """Two-sided paired sign-flip permutation p of the mean difference: each case's difference keeps or flips its
    sign; p = the share of sign patterns whose |mean| reaches the observed one. Exact over all 2^n patterns up
    to n = 12, else (1 + #{|mean*| ≥ |mean|}) / (1 + n_perm) from seeded draws; None without a difference."""
    d = np.asarray(diffs, dtype=float)
    if len(d) == 0:
        return None
    observed = abs(d.mean()) - 1e-12
    if len(d) <= 12:
        signs = 1 - 2 * ((np.arange(2 ** len(d))[:, None] >> np.arange(len(d))) & 1)
        return float(np.mean(np.abs((signs * d).mean(axis=1)) >= observed))
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(n_perm, len(d)))
    return float((1 + np.sum(np.abs((signs * d).mean(axis=1)) >= observed)) / (1 + n_perm))
