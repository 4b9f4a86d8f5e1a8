"""The reading room's quick prior alignment: a turned and shifted CT-like pair aligned within 2 mm and at least
as well as the full registration, the same transform on every run, and the start taken from the scanner's
coordinates or the image centres."""

from __future__ import annotations

import numpy as np

from copilot.engine.ops.registration import align_prior, register
from copilot.engine.volume.image import Volume

SHAPE, SPACING = (36, 64, 80), (2.0, 2.0, 2.0)  # k, j, i voxels; i, j, k mm


def turn(degrees: float) -> np.ndarray:
    a = np.radians(degrees)
    return np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])


def scan(rotation: np.ndarray, shift: np.ndarray, seed: int, origin: np.ndarray | None = None) -> Volume:
    """A body (ellipse, two organs, a spine, gas) on a grid; the body point b lies at rotation b + shift (RAS)."""
    k, j, i = np.mgrid[0 : SHAPE[0], 0 : SHAPE[1], 0 : SHAPE[2]].astype(np.float64)
    ijk_to_ras = np.diag([*SPACING, 1.0])
    ijk_to_ras[:3, 3] = -np.array(SPACING) * (np.array(SHAPE[::-1]) - 1) / 2 + (0 if origin is None else origin)
    ras = np.stack([i.ravel(), j.ravel(), k.ravel(), np.ones(i.size)]).T @ ijk_to_ras.T
    x, y, z = ((ras[:, :3] - shift) @ rotation).T
    hu = np.full(x.size, -1000.0)
    hu[(x / 70) ** 2 + (y / 50) ** 2 < 1] = 40.0
    hu[((x - 22) / 20) ** 2 + ((y - 5) / 17) ** 2 + (z / 25) ** 2 < 1] = 90.0
    hu[((x + 25) / 12) ** 2 + ((y + 4) / 10) ** 2 + ((z + 8) / 14) ** 2 < 1] = 150.0
    hu[(x / 8) ** 2 + ((y + 34) / 8) ** 2 < 1] = 700.0
    hu[((x + 4) / 9) ** 2 + ((y - 18) / 7) ** 2 + ((z - 10) / 12) ** 2 < 1] = -850.0
    hu[((x - 40) / 6) ** 2 + ((y + 20) / 6) ** 2 + ((z + 18) / 6) ** 2 < 1] = 400.0
    hu[((x / 8) ** 2 + ((y + 34) / 8) ** 2 < 1) & (np.cos(z / 4.0) > 0.3)] = 1000.0  # vertebrae between discs
    hu += np.random.default_rng(seed).normal(0, 10, x.size)
    return Volume(f"ct{seed}", hu.reshape(SHAPE).astype(np.float32), ijk_to_ras, modality="CT")


def test_a_turned_and_shifted_prior_is_aligned_within_two_millimetres() -> None:
    rotation, shift = turn(4.0), np.array([6.0, -5.0, 4.0])
    current, prior = scan(np.eye(3), np.zeros(3), 1), scan(rotation, shift, 2)
    first, again = align_prior(current, prior), align_prior(current, prior)
    assert first.parameters == again.parameters  # deterministic: one thread, a fixed seed
    half = np.array(SPACING) * (np.array(SHAPE[::-1]) - 1) / 2
    corners = np.array([[a, b, c, 1.0] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)]) * [*half, 1]
    truth = np.eye(4)
    truth[:3, :3], truth[:3, 3] = rotation, shift

    def error(found: np.ndarray) -> float:
        return float(np.linalg.norm((corners @ found.T - corners @ truth.T)[:, :3], axis=1).max())

    full = register(current, prior, "rigid", max_iterations=100)
    assert error(first.matrix_ras) < 2.0 and error(first.matrix_ras) <= error(full.matrix_ras), (first, full)


def test_the_start_is_the_image_centres_when_the_grids_lie_far_apart() -> None:
    far = np.array([0.0, 0.0, 300.0])  # the prior's grid 30 cm away in the scanner, the body at its centre
    current, prior = scan(np.eye(3), np.zeros(3), 1), scan(np.eye(3), far, 2, origin=far)
    found = align_prior(current, prior).matrix_ras
    assert np.abs(found[:3, 3] - far).max() < 1.0 and np.allclose(found[:3, :3], np.eye(3), atol=0.01)
