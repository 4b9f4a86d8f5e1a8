"""Segmentation operators on a source volume (SimpleITK): threshold, region growing from RAS seeds
(connected threshold or confidence connected), and statistics of a segment on any volume."""

from __future__ import annotations

from typing import Any

import numpy as np
import SimpleITK as sitk

from copilot.engine.volume.image import Volume, sitk_image


def mask_volume(source: Volume, mask: np.ndarray, name: str) -> Volume:
    """A 0/1 volume on the source's grid."""
    return Volume(
        name=name,
        data=mask.astype(np.float32),
        ijk_to_ras=source.ijk_to_ras.copy(),
        modality="SEG",
        source=f"segment of {source.name}",
    )


def threshold(source: Volume, lower: float, upper: float) -> np.ndarray:
    return (source.data >= lower) & (source.data <= upper)


def seed_indices(source: Volume, seeds_ras: list[list[float]]) -> list[tuple[int, int, int]]:
    """Nearest voxel (i, j, k) of each RAS seed; a seed outside the volume is an error."""
    out = []
    for ras in seeds_ras:
        vox = source.nearest_voxel(np.asarray(ras, dtype=float))
        if vox is None:
            raise ValueError(f"seed {ras} lies outside {source.name}")
        out.append(vox)
    return out


def grow(
    source: Volume,
    seeds_ras: list[list[float]],
    method: str = "confidence",
    lower: float | None = None,
    upper: float | None = None,
    multiplier: float = 2.5,
    iterations: int = 4,
    radius: int = 1,
) -> np.ndarray:
    """Region growing from seeds: `connected` (within [lower, upper]) or `confidence` (mean ± multiplier·sd)."""
    image = sitk_image(source)
    seeds = [tuple(int(v) for v in s) for s in seed_indices(source, seeds_ras)]
    if method == "connected":
        if lower is None or upper is None:
            raise ValueError("connected growing needs lower and upper")
        out = sitk.ConnectedThreshold(image, seedList=seeds, lower=float(lower), upper=float(upper))
    else:
        smooth = sitk.CurvatureFlow(sitk.Cast(image, sitk.sitkFloat32), timeStep=0.125, numberOfIterations=3)
        out = sitk.ConfidenceConnected(
            smooth,
            seedList=seeds,
            numberOfIterations=iterations,
            multiplier=multiplier,
            initialNeighborhoodRadius=radius,
            replaceValue=1,
        )
    mask = sitk.GetArrayFromImage(out) > 0
    return np.asarray(
        sitk.GetArrayFromImage(
            sitk.BinaryMorphologicalClosing(sitk.GetImageFromArray(mask.astype(np.uint8)), [1, 1, 1])
        )
        > 0
    )


def statistics(mask: Volume, volumes: dict[str, Volume]) -> dict[str, Any]:
    """Volume (mm³), centroid and extent (RAS) of a segment, and max/mean of each volume inside it."""
    on = mask.data > 0
    ijk = np.argwhere(on)[:, ::-1].astype(float)
    voxel_mm3 = float(abs(np.linalg.det(mask.ijk_to_ras[:3, :3])))
    if len(ijk) == 0:
        return {"voxels": 0, "volume_mm3": 0.0, "centroid_ras": None, "extent_ras": None, "intensity": {}}
    ras = ijk @ mask.ijk_to_ras[:3, :3].T + mask.ijk_to_ras[:3, 3]
    half = 0.5 * np.abs(mask.ijk_to_ras[:3, :3]).sum(axis=1)
    extent = {
        axis: [round(float(ras[:, n].min() - half[n]), 4), round(float(ras[:, n].max() + half[n]), 4)]
        for n, axis in enumerate("RAS")
    }
    intensity = {}
    for name, vol in volumes.items():
        # sample each volume at the segment's voxel centres (grids may differ)
        pts = np.c_[ras, np.ones(len(ras))] @ vol.ras_to_ijk.T
        idx = np.rint(pts[:, :3]).astype(int)
        ok = np.all((idx >= 0) & (idx < np.array(vol.dimensions)), axis=1)
        vals = vol.data[idx[ok, 2], idx[ok, 1], idx[ok, 0]]
        intensity[name] = {
            "max": float(vals.max()) if vals.size else None,
            "mean": float(vals.mean()) if vals.size else None,
            "samples": int(vals.size),
        }
    return {
        "voxels": len(ijk),
        "volume_mm3": round(len(ijk) * voxel_mm3, 4),
        "centroid_ras": [round(float(v), 4) for v in ras.mean(axis=0)],
        "extent_ras": extent,
        "intensity": intensity,
    }
