"""Rigid/affine registration with Mattes mutual information (SimpleITK), BRAINSFit-like parameters, and
resampling through a transform. Inputs are never modified; outputs are new arrays.

Registration is deterministic: the metric samples its voxels with a fixed seed and runs on one thread
(`THREADS`, set as ITK's process default for the duration of the registration, since the internal
filters and the metric take their thread count from it), because ITK's multi-threaded Mattes metric sums
per-thread partial histograms in an order that varies, which changes the last digits from run to run. The same inputs
give bit-identical transforms, so a replayed trace reproduces every registration exactly.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import SimpleITK as sitk

from copilot.engine.geometry import lps_matrix_to_ras
from copilot.engine.volume.image import LPS_TO_RAS, Volume, sitk_image, volume_from_sitk

THREADS = 1  # one thread: the metric's sums are then always taken in the same order
SEED = 1  # the metric's random sampling seed


@dataclass
class RegistrationResult:
    matrix_ras: np.ndarray  # 4×4, fixed RAS → moving RAS
    parameters: list[float]
    metric: float
    iterations: int
    seconds: float
    stop_condition: str


def register(
    fixed: Volume,
    moving: Volume,
    kind: str = "rigid",
    sampling_percentage: float = 0.02,
    histogram_bins: int = 50,
    max_iterations: int = 200,
    seed: int = SEED,
    observer: Callable[[int, int, float], bool] | None = None,
) -> RegistrationResult:
    """Multi-resolution (shrink 4/2/1, smoothing 2/1/0 mm) Mattes MI registration; geometric-centre start."""
    t0 = time.perf_counter()
    f = sitk.Cast(sitk_image(fixed), sitk.sitkFloat32)
    m = sitk.Cast(sitk_image(moving), sitk.sitkFloat32)
    base = sitk.Euler3DTransform() if kind == "rigid" else sitk.AffineTransform(3)
    initial = sitk.CenteredTransformInitializer(f, m, base, sitk.CenteredTransformInitializerFilter.GEOMETRY)
    reg = sitk.ImageRegistrationMethod()
    reg.SetMetricAsMattesMutualInformation(numberOfHistogramBins=histogram_bins)
    reg.SetMetricSamplingStrategy(reg.RANDOM)
    reg.SetMetricSamplingPercentage(sampling_percentage, seed)
    reg.SetInterpolator(sitk.sitkLinear)
    reg.SetOptimizerAsRegularStepGradientDescent(
        learningRate=2.0, minStep=1e-4, numberOfIterations=max_iterations, gradientMagnitudeTolerance=1e-8
    )
    reg.SetOptimizerScalesFromPhysicalShift()
    reg.SetShrinkFactorsPerLevel([4, 2, 1])
    reg.SetSmoothingSigmasPerLevel([2.0, 1.0, 0.0])
    reg.SmoothingSigmasAreSpecifiedInPhysicalUnitsOn()
    reg.SetInitialTransform(initial, inPlace=False)
    if observer is not None:  # (level, iteration, metric) → True stops the registration

        def on_iteration() -> None:
            if observer(reg.GetCurrentLevel(), reg.GetOptimizerIteration(), reg.GetMetricValue()):
                reg.StopRegistration()

        reg.AddCommand(sitk.sitkIterationEvent, on_iteration)
    with _fixed_threads():
        final = reg.Execute(f, m)
    tx = final.GetNthTransform(0) if isinstance(final, sitk.CompositeTransform) else final
    return RegistrationResult(
        _ras_matrix(tx),
        list(tx.GetParameters()),
        float(reg.GetMetricValue()),
        int(reg.GetOptimizerIteration()),
        time.perf_counter() - t0,
        reg.GetOptimizerStopConditionDescription(),
    )


def align_prior(fixed: Volume, moving: Volume, seed: int = SEED, samples: int = 12_000) -> RegistrationResult:
    """A quick rigid alignment of a prior (`moving`) to the current study (`fixed`), for the reading room's
    proposal: Mattes MI on averaged copies of about 4 mm, then about 2 mm voxels (`PRIOR_LEVELS_MM`), about
    `samples` voxels drawn per level and gradients taken where sampled (no gradient images), started from
    whichever of the scanner's own coordinates (the same frame of reference) and the image centres matches
    better. Deterministic, like `register` (one thread, a fixed seed)."""
    t0 = time.perf_counter()
    f = sitk.Cast(sitk_image(fixed), sitk.sitkFloat32)
    m = sitk.Cast(sitk_image(moving), sitk.sitkFloat32)
    iterations, metric, stop = 0, 0.0, ""
    with _fixed_threads():
        levels = [(size, _coarse(f, size), _coarse(m, size)) for size in PRIOR_LEVELS_MM]
        tx: sitk.Transform = _better_start(levels[0][1], levels[0][2], seed)
        for size, small_f, small_m in levels:
            reg = sitk.ImageRegistrationMethod()
            reg.SetMetricAsMattesMutualInformation(numberOfHistogramBins=PRIOR_BINS)
            reg.SetMetricSamplingStrategy(reg.RANDOM)
            reg.SetMetricSamplingPercentage(min(1.0, samples / small_f.GetNumberOfPixels()), seed)
            reg.SetMetricUseFixedImageGradientFilter(False)  # gradients where sampled: no gradient images
            reg.SetMetricUseMovingImageGradientFilter(False)
            reg.SetInterpolator(sitk.sitkLinear)
            reg.SetOptimizerAsRegularStepGradientDescent(
                learningRate=size, minStep=PRIOR_MIN_STEP, numberOfIterations=PRIOR_ITERATIONS,
                gradientMagnitudeTolerance=1e-6, relaxationFactor=PRIOR_RELAXATION,
            )  # fmt: skip
            reg.SetOptimizerScalesFromPhysicalShift()
            reg.SetInitialTransform(tx, inPlace=False)
            out = reg.Execute(small_f, small_m)
            tx = out.GetNthTransform(0) if isinstance(out, sitk.CompositeTransform) else out
            tx = sitk.Euler3DTransform(tx)
            iterations += int(reg.GetOptimizerIteration())
            metric, stop = float(reg.GetMetricValue()), reg.GetOptimizerStopConditionDescription()
    return RegistrationResult(
        _ras_matrix(tx), list(tx.GetParameters()), metric, iterations, time.perf_counter() - t0, stop
    )


PRIOR_LEVELS_MM = (4.0, 2.0)
PRIOR_BINS, PRIOR_MIN_STEP, PRIOR_ITERATIONS, PRIOR_RELAXATION = 32, 0.01, 60, 0.5  # the optimiser per level


def _coarse(image: sitk.Image, size_mm: float) -> sitk.Image:
    """`image` averaged over blocks of whole voxels to about `size_mm` (an axis already coarser is kept)."""
    factors = [max(1, round(size_mm / s)) for s in image.GetSpacing()]
    return sitk.BinShrink(image, factors) if max(factors) > 1 else image


def _better_start(f: sitk.Image, m: sitk.Image, seed: int) -> sitk.Transform:
    """Identity (both in the scanner's coordinates) or the image centres aligned: the one whose metric is lower
    (on the coarse copies `f`, `m`)."""
    small_f, small_m = f, m
    starts = [sitk.Euler3DTransform(), sitk.CenteredTransformInitializer(
        f, m, sitk.Euler3DTransform(), sitk.CenteredTransformInitializerFilter.GEOMETRY)]  # fmt: skip
    best, best_value = starts[1], float("inf")
    for start in starts:
        probe = sitk.ImageRegistrationMethod()
        probe.SetMetricAsMattesMutualInformation(numberOfHistogramBins=PRIOR_BINS)
        probe.SetMetricSamplingStrategy(probe.RANDOM)
        probe.SetMetricSamplingPercentage(min(1.0, 20_000 / small_f.GetNumberOfPixels()), seed)
        probe.SetInterpolator(sitk.sitkLinear)
        probe.SetInitialTransform(start)
        try:
            value = probe.MetricEvaluate(small_f, small_m)
        except RuntimeError:  # ITK: too few samples fall inside the moving image from this start
            continue
        if value < best_value:
            best, best_value = start, value
    return best


_THREADS_LOCK = threading.Lock()


@contextlib.contextmanager
def _fixed_threads():  # type: ignore[no-untyped-def]
    """ITK's default thread count set to `THREADS` while one registration runs (restored after)."""
    with _THREADS_LOCK:
        before = sitk.ProcessObject.GetGlobalDefaultNumberOfThreads()
        sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(THREADS)
        try:
            yield
        finally:
            sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(before)


def _ras_matrix(tx: sitk.Transform) -> np.ndarray:
    """4×4 RAS matrix of an ITK (LPS) linear transform."""
    dim = 3
    a = np.array(tx.GetMatrix()).reshape(dim, dim) if hasattr(tx, "GetMatrix") else np.eye(3)
    c = np.array(tx.GetCenter()) if hasattr(tx, "GetCenter") else np.zeros(3)
    t = np.array(tx.GetTranslation()) if hasattr(tx, "GetTranslation") else np.zeros(3)
    lps = np.eye(4)
    lps[:3, :3] = a
    lps[:3, 3] = t + c - a @ c
    return lps_matrix_to_ras(lps)


def resample(moving: Volume, reference: Volume, matrix_ras: np.ndarray, name: str, nearest: bool = False) -> Volume:
    """`moving` on `reference`'s grid through a fixed→moving RAS transform; a new volume."""
    lps = lps_matrix_to_ras(matrix_ras)
    tx = sitk.AffineTransform(3)
    tx.SetMatrix(lps[:3, :3].ravel().tolist())
    tx.SetTranslation(lps[:3, 3].tolist())
    interp = sitk.sitkNearestNeighbor if nearest else sitk.sitkLinear
    out = sitk.Resample(sitk_image(moving), sitk_image(reference), tx, interp, 0.0, sitk.sitkFloat32)
    return volume_from_sitk(out, name, modality=moving.modality, source=f"resampled from {moving.name}")


def checkerboard(a: np.ndarray, b: np.ndarray, tiles: int = 8) -> np.ndarray:
    """Alternate squares of two same-size images (RGB or grey)."""
    h, w = a.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    board = ((yy * tiles // h) + (xx * tiles // w)) % 2 == 0
    out = b.copy()
    out[board] = a[board]
    return out


__all__ = ["LPS_TO_RAS", "RegistrationResult", "align_prior", "checkerboard", "register", "resample"]
