"""A stored segmentation (DICOM SEG) shown over its source series (Qt-free): each segment's frames placed into the
voxel grid of the volume shown (by each frame's plane position and the SEG's pixel spacing, nearest voxel), its
name and recommended colour, its volume and the background's values inside it; and the overlay of the segments
switched on, for a pane's picture, sampled at each pixel's RAS point. A file that is no segmentation, or one of
another frame of reference than the volume, is refused by name."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pydicom

DEFAULT_COLOURS = ((255, 90, 60), (60, 200, 255), (120, 230, 90), (250, 210, 60), (200, 120, 250))
ALPHA = 0.45  # the overlay's opacity over the picture: the anatomy stays visible under it


@dataclass
class Segment:
    number: int
    name: str
    colour: tuple[int, int, int]
    mask: np.ndarray  # bool, the volume's [k, j, i] grid
    shown: bool = True
    stats: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        """'#1 liver — 12.3 ml, 1534 voxels, mean 54 (min −20, max 180)'."""
        s = self.stats
        values = f", mean {s['mean']:.0f} (min {s['min']:.0f}, max {s['max']:.0f})" if "mean" in s else ""
        return f"#{self.number} {self.name} — {s.get('ml', 0.0):.2f} ml, {int(s.get('voxels', 0))} voxels{values}"


def _lab_to_rgb(lab: list[int]) -> tuple[int, int, int]:
    """DICOM's recommended display CIELab (0–65535 scaled) to sRGB, D65."""
    lightness, a, b = lab[0] * 100.0 / 65535.0, lab[1] * 255.0 / 65535.0 - 128.0, lab[2] * 255.0 / 65535.0 - 128.0
    fy = (lightness + 16.0) / 116.0
    fx, fz = fy + a / 500.0, fy - b / 200.0

    def inv(t: float) -> float:
        return t**3 if t**3 > 0.008856 else (t - 16.0 / 116.0) / 7.787

    x, y, z = 0.95047 * inv(fx), inv(fy), 1.08883 * inv(fz)
    rgb = np.array([[3.2406, -1.5372, -0.4986], [-0.9689, 1.8758, 0.0415], [0.0557, -0.2040, 1.0570]]) @ [x, y, z]
    rgb = np.where(rgb > 0.0031308, 1.055 * np.power(np.clip(rgb, 0, None), 1 / 2.4) - 0.055, 12.92 * rgb)
    return tuple(round(float(np.clip(c, 0, 1)) * 255) for c in rgb)  # type: ignore[return-value]


def read_seg(path: str | Path, volume: Any) -> list[Segment]:
    """The segments of the SEG at `path` on `volume`'s voxel grid (ValueError naming why it cannot be shown)."""
    try:
        ds = pydicom.dcmread(str(path))
    except Exception as exc:
        raise ValueError(f"{Path(path).name} is not a DICOM file: {exc}") from exc
    if str(getattr(ds, "Modality", "")) != "SEG" or "SegmentSequence" not in ds:
        raise ValueError(f"{Path(path).name} is not a segmentation (modality {getattr(ds, 'Modality', '?')})")
    frames = np.asarray(ds.pixel_array)
    frames = frames.reshape((-1, *frames.shape[-2:])) > 0
    shared = ds.get("SharedFunctionalGroupsSequence") or [{}]
    per_frame = ds.get("PerFrameFunctionalGroupsSequence") or []
    if len(per_frame) != len(frames):
        raise ValueError(f"{Path(path).name}: {len(per_frame)} frame descriptions for {len(frames)} frames")
    shape = tuple(int(n) for n in volume.data.shape)  # (k, j, i)
    ras_to_ijk = np.linalg.inv(np.asarray(volume.ijk_to_ras, dtype=float))
    masks: dict[int, np.ndarray] = {}
    for frame, group in zip(frames, per_frame, strict=True):

        def fg(name: str, group: Any = group) -> Any:  # a functional group: the frame's own, else the shared one
            return (group if name in group else shared[0])[name][0]

        number = int(fg("SegmentIdentificationSequence").ReferencedSegmentNumber)
        ipp = [float(v) for v in fg("PlanePositionSequence").ImagePositionPatient]
        iop = [float(v) for v in fg("PlaneOrientationSequence").ImageOrientationPatient]
        dy, dx = (float(v) for v in fg("PixelMeasuresSequence").PixelSpacing)
        rows, cols = np.nonzero(frame)
        if not len(rows):
            continue
        lps = np.asarray(ipp) + np.outer(cols * dx, iop[:3]) + np.outer(rows * dy, iop[3:])
        ras = lps * np.array([-1.0, -1.0, 1.0])
        ijk = np.rint(ras @ ras_to_ijk[:3, :3].T + ras_to_ijk[:3, 3]).astype(int)
        inside = np.all((ijk >= 0) & (ijk < np.array(shape[::-1])), axis=1)
        if not inside.any():
            raise ValueError(f"{Path(path).name} lies outside {volume.name}: made on another series?")
        mask = masks.setdefault(number, np.zeros(shape, dtype=bool))
        i, j, k = ijk[inside].T
        mask[k, j, i] = True
    out = []
    for n, item in enumerate(ds.SegmentSequence):
        number = int(item.SegmentNumber)
        lab = item.get("RecommendedDisplayCIELabValue")
        colour = _lab_to_rgb([int(v) for v in lab]) if lab else DEFAULT_COLOURS[n % len(DEFAULT_COLOURS)]
        mask = masks.get(number, np.zeros(shape, dtype=bool))
        out.append(Segment(number, str(getattr(item, "SegmentLabel", "") or f"segment {number}"), colour, mask,
                           stats=statistics(mask, volume)))  # fmt: skip
    return out


def statistics(mask: np.ndarray, volume: Any) -> dict[str, float]:
    """Voxels, volume in ml and the volume's values inside the mask (none: voxels and ml only)."""
    voxels = int(mask.sum())
    spacing = np.linalg.norm(np.asarray(volume.ijk_to_ras, dtype=float)[:3, :3], axis=0)
    stats = {"voxels": float(voxels), "ml": voxels * float(np.prod(spacing)) / 1000.0}
    if voxels:
        values = np.asarray(volume.data)[mask]
        stats.update(mean=float(values.mean()), min=float(values.min()), max=float(values.max()))
    return stats


def overlay(segments: list[Segment], volume: Any, image_to_ras: np.ndarray, size: tuple[int, int]) -> np.ndarray | None:
    """RGBA (H×W×4 uint8) of the shown segments over a pane's picture of `size`, None when none shows there."""
    shown = [s for s in segments if s.shown and s.mask.any()]
    if not shown:
        return None
    w, h = size
    ys, xs = np.mgrid[0:h, 0:w]
    pix = np.stack([xs.ravel(), ys.ravel(), np.zeros(w * h), np.ones(w * h)])
    ras = (np.asarray(image_to_ras, dtype=float) @ pix)[:3]
    ras_to_ijk = np.linalg.inv(np.asarray(volume.ijk_to_ras, dtype=float))
    ijk = np.rint(ras_to_ijk[:3, :3] @ ras + ras_to_ijk[:3, 3:4]).astype(int)
    kji = ijk[::-1]
    shape = np.array(shown[0].mask.shape)[:, None]
    inside = np.all((kji >= 0) & (kji < shape), axis=0)
    out = np.zeros((h * w, 4), dtype=np.uint8)
    for seg in shown:
        hit = np.zeros(h * w, dtype=bool)
        hit[inside] = seg.mask[kji[0, inside], kji[1, inside], kji[2, inside]]
        out[hit] = (*seg.colour, int(255 * ALPHA))
    return out.reshape(h, w, 4) if out[:, 3].any() else None
