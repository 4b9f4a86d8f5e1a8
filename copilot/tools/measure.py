"""Measurements the model can cite: the value at a RAS point and statistics over a sphere, a box or a segment.

Both only read the volume (Track A, harness protocol; the paper's Table 9 has neither, so `--protocol paper`
does not offer them). Values are as the viewer stores them: CT in HU (rescaled), PET also as SUVbw/SUVlbm/SUVbsa
where its tags allow (`copilot.engine.volume.suv`), anything else in its own units. Regions are bounded
(`MAX_REGION_MM`) so one call cannot sweep a whole-body volume voxel by voxel.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from copilot.engine.volume.suv import volume_suv
from copilot.errors import HandlerError
from copilot.tools.args import RAS, Mm, VolumeId, VolumeName, volume_ref
from copilot.tools.radiology import handler
from copilot.tools.registry import HandlerOutput, RadiologyContext

MAX_REGION_MM = 300.0
RadiusMm = Annotated[float | None, Field(gt=0, le=MAX_REGION_MM / 2, description="Sphere radius in millimetres.")]
SizeMm = Annotated[
    list[Annotated[float, Field(gt=0, le=MAX_REGION_MM)]] | None,
    Field(min_length=3, max_length=3, description="Box edge lengths along R, A, S in millimetres."),
]
CentreRas = Annotated[
    list[Mm] | None, Field(min_length=3, max_length=3, description="Sphere or box centre [R, A, S] in mm.")
]


def units_of(volume: Any) -> str:
    """The unit a volume's values read in: HU for CT (a CT's rescaled values are HU, whether its Rescale Type says
    HU or US, unspecified), the file's unit otherwise (e.g. BQML, Gy), else ''."""
    unit = str((getattr(volume, "metadata", {}) or {}).get("units") or "")
    return "HU" if str(getattr(volume, "modality", "")) == "CT" and unit in ("", "HU", "US") else unit


def suv_terms(volume: Any, values: dict[str, float]) -> dict[str, Any] | None:
    """The same statistics as SUVbw/SUVlbm/SUVbsa for a PET volume whose tags allow it (else why not)."""
    if str(getattr(volume, "modality", "")) != "PT":
        return None
    suv = volume_suv(volume)
    if suv.bw is None:
        return {"available": False, "reason": suv.reason}
    out: dict[str, Any] = {"available": True, "decay_reference": suv.reference}
    for name, factor in (("bw", suv.bw), ("lbm", suv.lbm), ("bsa", suv.bsa)):
        if factor is not None:
            out[name] = {k: round(v * factor, 4) for k, v in values.items() if k != "sd" or v is not None}
    return out


def _volume(ctx: RadiologyContext, volume_id: str | None, volume_name: str | None) -> tuple[str, Any]:
    vid = volume_ref(ctx, volume_id, volume_name)
    return vid, ctx.viewer.volume(vid)


@handler(role="viewer_control")
def probe_value(
    ctx: RadiologyContext, ras: RAS, volume_id: VolumeId = None, volume_name: VolumeName = None
) -> HandlerOutput:
    """The value of the voxel nearest a RAS point of a volume (HU for CT, SUV for PET where its tags allow), with
    the voxel's index; the views do not move."""
    vid, vol = _volume(ctx, volume_id, volume_name)
    ijk = vol.nearest_voxel(np.asarray(ras, dtype=float))
    if ijk is None:
        raise HandlerError("out_of_volume", f"RAS {list(ras)} lies outside {vol.name}")
    i, j, k = ijk
    value = float(vol.data[k, j, i])
    centre = [round(float(v), 3) for v in vol.ijk_to_ras_point(np.array([i, j, k], dtype=float))]
    result = {"volume_id": vid, "volume": vol.name, "ras": list(ras), "ijk": [int(i), int(j), int(k)],
              "voxel_centre_ras": centre, "value": value, "units": units_of(vol)}  # fmt: skip
    suv = suv_terms(vol, {"value": value})
    if suv is not None:
        result["suv"] = suv
    return HandlerOutput(result)


def _grid_points(vol: Any, lo_ras: np.ndarray, hi_ras: np.ndarray) -> tuple[tuple[slice, ...], np.ndarray]:
    """The voxel index ranges covering a RAS box, and the RAS of those voxels' centres (k, j, i, 3)."""
    corners = np.array([[x, y, z] for x in (lo_ras[0], hi_ras[0]) for y in (lo_ras[1], hi_ras[1])
                        for z in (lo_ras[2], hi_ras[2])])  # fmt: skip
    ijk = np.array([vol.ras_to_ijk_point(c) for c in corners])
    shape = vol.data.shape  # (k, j, i)
    lo = np.clip(np.floor(ijk.min(axis=0)).astype(int), 0, [shape[2], shape[1], shape[0]])
    hi = np.clip(np.ceil(ijk.max(axis=0)).astype(int) + 1, 0, [shape[2], shape[1], shape[0]])
    ii, jj, kk = (np.arange(lo[n], hi[n]) for n in range(3))
    k3, j3, i3 = np.meshgrid(kk, jj, ii, indexing="ij")
    ones = np.ones_like(i3, dtype=float)
    pts = np.stack([i3, j3, k3, ones], axis=-1).astype(float) @ vol.ijk_to_ras.T
    return (slice(lo[2], hi[2]), slice(lo[1], hi[1]), slice(lo[0], hi[0])), pts[..., :3]


def _segment_mask(ctx: RadiologyContext, ref: str, vol: Any) -> tuple[tuple[slice, ...], np.ndarray]:
    """A segment's voxels on the measured volume's grid (nearest mask voxel of each volume voxel centre)."""
    _, segment = ctx.viewer.segment(ref)
    mask = segment.mask
    where = np.argwhere(mask.data > 0)
    if not len(where):
        raise HandlerError("empty_segment", f"segment {ref!r} holds no voxel")
    (k0, j0, i0), (k1, j1, i1) = where.min(0), where.max(0)
    corners = np.array([mask.ijk_to_ras_point(np.array([i, j, k], dtype=float))
                        for i in (i0, i1) for j in (j0, j1) for k in (k0, k1)])  # fmt: skip
    region, pts = _grid_points(vol, corners.min(0) - 1.0, corners.max(0) + 1.0)
    hom = np.concatenate([pts, np.ones((*pts.shape[:-1], 1))], axis=-1) @ mask.ras_to_ijk.T
    idx = np.rint(hom[..., :3]).astype(int)
    kmax, jmax, imax = mask.data.shape
    inside = ((idx[..., 0] >= 0) & (idx[..., 0] < imax) & (idx[..., 1] >= 0) & (idx[..., 1] < jmax)
              & (idx[..., 2] >= 0) & (idx[..., 2] < kmax))  # fmt: skip
    sel = np.zeros(inside.shape, dtype=bool)
    sel[inside] = mask.data[idx[..., 2][inside], idx[..., 1][inside], idx[..., 0][inside]] > 0
    return region, sel


@handler(role="viewer_control")
def region_stats(
    ctx: RadiologyContext,
    shape: Annotated[Literal["sphere", "box", "segment"], Field(description="The region's shape.")],
    center_ras: CentreRas = None,
    radius_mm: RadiusMm = None,
    size_mm: SizeMm = None,
    segment: Annotated[str | None, Field(max_length=256, description="Segment id or name (shape 'segment').")] = None,
    volume_id: VolumeId = None,
    volume_name: VolumeName = None,
) -> HandlerOutput:
    """Mean, SD, min, max and volume (ml) of a volume's voxels inside a sphere, an axis-aligned RAS box or a
    segment (HU for CT; SUV too for PET where its tags allow); the views do not move."""
    vid, vol = _volume(ctx, volume_id, volume_name)
    if shape == "segment":
        if segment is None:
            raise HandlerError("invalid_arguments", "shape 'segment' needs a segment")
        region, sel = _segment_mask(ctx, segment, vol)
    else:
        if center_ras is None:
            raise HandlerError("invalid_arguments", f"shape {shape!r} needs center_ras")
        c = np.asarray(center_ras, dtype=float)
        if shape == "sphere":
            if radius_mm is None:
                raise HandlerError("invalid_arguments", "a sphere needs radius_mm")
            half = np.full(3, float(radius_mm))
        else:
            if size_mm is None:
                raise HandlerError("invalid_arguments", "a box needs size_mm")
            half = np.asarray(size_mm, dtype=float) / 2.0
        region, pts = _grid_points(vol, c - half, c + half)
        if shape == "sphere":
            sel = np.sum((pts - c) ** 2, axis=-1) <= float(radius_mm or 0) ** 2
        else:
            sel = np.all(np.abs(pts - c) <= half + 1e-9, axis=-1)
    values = np.asarray(vol.data[region], dtype=np.float64)[sel]
    if values.size == 0:
        raise HandlerError("empty_region", "the region holds no voxel of the volume (outside it, or too small)")
    voxel_ml = abs(float(np.linalg.det(vol.ijk_to_ras[:3, :3]))) / 1000.0
    stats = {"mean": float(values.mean()), "sd": float(values.std(ddof=1)) if values.size > 1 else 0.0,
             "min": float(values.min()), "max": float(values.max())}  # fmt: skip
    result: dict[str, Any] = {
        "volume_id": vid, "volume": vol.name, "shape": shape, "voxels": int(values.size),
        "volume_ml": round(values.size * voxel_ml, 4), "units": units_of(vol),
        **{k: round(v, 4) for k, v in stats.items()},
    }  # fmt: skip
    suv = suv_terms(vol, stats)
    if suv is not None:
        result["suv"] = suv
    return HandlerOutput(result)
