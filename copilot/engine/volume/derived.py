"""Derived scene objects made by analysis operators: segments (label maps) and transforms, each named and
carrying its provenance (which operator, from which nodes, with which parameters)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageFilter

from copilot.engine.volume.image import Volume
from copilot.engine.volume.voxel_plane import image_to_ijk

SEGMENT_COLOURS = ((255, 64, 64), (64, 200, 64), (64, 128, 255), (255, 200, 0), (200, 64, 255), (0, 220, 220))


@dataclass(eq=False)
class Segment:
    """A binary segment on the grid of its source volume."""

    name: str
    mask: Volume  # data 0/1 on the source grid
    source: str  # volume node id the segment was made from
    provenance: dict[str, Any] = field(default_factory=dict)
    colour: tuple[int, int, int] = SEGMENT_COLOURS[0]

    def voxels(self) -> int:
        return int((self.mask.data > 0).sum())


@dataclass(eq=False)
class TransformNode:
    """A linear transform from registration: maps fixed-space RAS points to moving-space RAS points."""

    name: str
    fixed: str
    moving: str
    matrix: np.ndarray  # 4×4, RAS(fixed) → RAS(moving), as ITK registration transforms map
    kind: str
    parameters: list[float]
    metric: float
    provenance: dict[str, Any] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fixed": self.fixed,
            "moving": self.moving,
            "kind": self.kind,
            "matrix_ras": [[round(float(v), 6) for v in row] for row in self.matrix],
            "final_metric": round(self.metric, 6),
        }


def outline(segment: Segment, image_to_ras: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Boolean (H, W) outline of a segment in a view, sampled nearest-neighbour on the view's grid."""
    w, h = size
    m = image_to_ijk(segment.mask, image_to_ras)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32) + np.float32(0.5)
    ijk = [np.rint(m[a, 0] * xs + m[a, 1] * ys + m[a, 3]).astype(np.int64) for a in range(3)]
    dims = segment.mask.dimensions
    inside = np.ones((h, w), dtype=bool)
    for a in range(3):
        inside &= (ijk[a] >= 0) & (ijk[a] < dims[a])
    on = np.zeros((h, w), dtype=bool)
    data = segment.mask.data
    on[inside] = data[ijk[2][inside], ijk[1][inside], ijk[0][inside]] > 0
    if not on.any():
        return on
    eroded = np.asarray(Image.fromarray(on.astype(np.uint8) * 255).filter(ImageFilter.MinFilter(3))) > 0
    return on & ~eroded
