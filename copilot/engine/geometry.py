"""Slice-view geometry with 3D Slicer's conventions.

Orientation matrices are Slicer 5's vtkMRMLSliceNode::Get{Axial,Sagittal,Coronal}SliceToRASMatrix
(radiological convention): columns are the screen-right direction, the screen-up direction and the
view normal, all in RAS. Slicer 5's sagittal normal is L, so Slicer's own (native) sagittal offset
is −R. Handlers and evidence speak the canonical offset: the RAS coordinate along the view's
anatomical axis (axial = S, sagittal = R, coronal = A). `native_offset`/`canonical_offset` are
the one place where the two conventions meet.

A rendered image of W×H pixels shows the field of view fitted inside it at a uniform mm/pixel
(`pixel_mm`), centred on the slice centre. Image coordinates are continuous, origin at the
top-left corner, pixel (c, r) covering [c, c+1)×[r, r+1). Pixel (c, r) shows the RAS point of
Slicer's XYToRAS at XY = (c, H−1−r) (Slicer's XY origin is the bottom-left pixel, sampled at the
field of view's edge). Model coordinates `*_1000` run from 0 (centre of the first pixel) to 999
(centre of the last pixel) along each axis, so every pixel is addressable at any image size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

VIEW_NAMES = ("red", "yellow", "green")
VIEW_ORIENTATION = {"red": "axial", "yellow": "sagittal", "green": "coronal"}
AXIS_LABEL = {"axial": "S", "sagittal": "R", "coronal": "A"}

ORIENTATION_MATRICES: dict[str, np.ndarray] = {
    # columns: screen right, screen up, normal
    "axial": np.array([[-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
    "sagittal": np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),
    "coronal": np.array([[-1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]),
}
AXIS_VECTORS: dict[str, np.ndarray] = {
    "axial": np.array([0.0, 0.0, 1.0]),
    "sagittal": np.array([1.0, 0.0, 0.0]),
    "coronal": np.array([0.0, 1.0, 0.0]),
}


def offset_sign(orientation: str) -> float:
    """+1 where Slicer's slice normal points along the canonical axis, −1 where it points against it."""
    return float(np.sign(AXIS_VECTORS[orientation] @ ORIENTATION_MATRICES[orientation][:, 2]))


def native_offset(orientation: str, offset: float) -> float:
    """Slicer's slice offset (along its slice normal) for a canonical RAS offset."""
    return offset_sign(orientation) * offset


def canonical_offset(orientation: str, native: float) -> float:
    """The canonical RAS offset (axial S, sagittal R, coronal A) for Slicer's slice offset."""
    return offset_sign(orientation) * native


def canonical_range(orientation: str, native_lo: float, native_hi: float) -> tuple[float, float]:
    """A native offset interval as a canonical (min, max)."""
    a, b = canonical_offset(orientation, native_lo), canonical_offset(orientation, native_hi)
    return (min(a, b), max(a, b))


def voxel_box_corners(ijk_to_ras: np.ndarray, dimensions: tuple[int, int, int]) -> np.ndarray:
    """RAS corners (8, 3) of the full-voxel box (voxel centres ± half a voxel), Slicer's volume bounds."""
    i, j, k = (d - 0.5 for d in dimensions)
    ijk = np.array([[a, b, c, 1.0] for a in (-0.5, i) for b in (-0.5, j) for c in (-0.5, k)])
    return (ijk_to_ras @ ijk.T).T[:, :3]


def slice_spacing(ijk_to_ras: np.ndarray, normal: np.ndarray) -> float:
    """Slicer's slider step (vtkMRMLSliceLogic::GetVolumeSliceSpacing along the normal): the IJK axis that
    is closest to the normal in index space, projected onto the normal."""
    lin = ijk_to_ras[:3, :3]
    in_ijk = np.abs(np.linalg.solve(lin, normal))
    a = int(np.argmax(in_ijk))
    return float(abs(lin[:, a] @ normal))


def fitted_fov(box_corners_ras: np.ndarray, matrix: np.ndarray, size: tuple[int, int]) -> tuple[float, float]:
    """vtkMRMLSliceLogic::FitSliceToVolumes's field of view for a view of `size` pixels."""
    w, h = size
    display_x = float(np.ptp(box_corners_ras @ matrix[:, 0]))
    display_y = float(np.ptp(box_corners_ras @ matrix[:, 1]))
    fit_x, fit_y = display_x, display_y
    if h > w:
        fit_y = fit_x / w * h
    else:
        fit_x = fit_y / h * w
    if display_x > fit_x:
        fit_y, fit_x = fit_y / (fit_x / display_x), display_x
    if display_y > fit_y:
        fit_x, fit_y = fit_x / (fit_y / display_y), display_y
    return (fit_x, fit_y)


@dataclass
class SliceView:
    """One slice view's state: orientation, centre (RAS), field of view (mm) and last render size."""

    name: str
    orientation: str
    center: np.ndarray = field(default_factory=lambda: np.zeros(3))
    fov: tuple[float, float] = (250.0, 250.0)
    last_size: tuple[int, int] = (512, 512)

    @property
    def matrix(self) -> np.ndarray:
        """3×3 orientation (columns: right, up, normal) in RAS."""
        return ORIENTATION_MATRICES[self.orientation]

    @property
    def normal(self) -> np.ndarray:
        return self.matrix[:, 2]

    @property
    def axis(self) -> np.ndarray:
        """Unit RAS vector of the canonical offset axis (S, R or A); ±normal."""
        return AXIS_VECTORS[self.orientation]

    @property
    def offset(self) -> float:
        """Canonical slice offset in mm: the RAS coordinate of the slice plane along S, R or A."""
        return float(self.axis @ self.center)

    @property
    def native_offset(self) -> float:
        """Slicer's slice offset: the coordinate of the plane along Slicer's slice normal."""
        return float(self.normal @ self.center)

    @property
    def axis_label(self) -> str:
        return AXIS_LABEL[self.orientation]

    def slice_to_ras(self) -> np.ndarray:
        """4×4 SliceToRAS matrix (orientation and slice centre), as Slicer's slice node holds it."""
        m = np.eye(4)
        m[:3, :3] = self.matrix
        m[:3, 3] = self.center
        return m

    def set_offset(self, offset: float) -> None:
        """Move the plane along its normal so that its canonical offset is `offset`."""
        self.center = self.center + (offset - self.offset) * self.axis

    def pixel_mm(self, size: tuple[int, int]) -> float:
        """Millimetres per pixel when rendering at `size` (fit the FOV inside the image)."""
        w, h = size
        return max(self.fov[0] / w, self.fov[1] / h)

    def image_to_ras_matrix(self, size: tuple[int, int]) -> np.ndarray:
        """4×4 matrix taking homogeneous image coordinates (x, y, 0, 1) to RAS: the centre of pixel (c, r)
        lands on Slicer's XYToRAS(c, H−1−r)."""
        w, h = size
        s = self.pixel_mm(size)
        right, up = self.matrix[:, 0], self.matrix[:, 1]
        m = np.eye(4)
        m[:3, 0] = right * s
        m[:3, 1] = -up * s
        m[:3, 2] = self.normal
        m[:3, 3] = self.center - right * ((w + 1) / 2 * s) + up * ((h - 1) / 2 * s)
        return m

    def image_to_ras(self, xy: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """RAS of continuous image coordinates, shape (..., 2) → (..., 3)."""
        xy = np.asarray(xy, dtype=float)
        m = self.image_to_ras_matrix(size)
        return xy[..., 0, None] * m[:3, 0] + xy[..., 1, None] * m[:3, 1] + m[:3, 3]

    def ras_to_image(self, ras: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """Image coordinates (x, y) of the in-plane projection of RAS points, shape (..., 3) → (..., 2)."""
        m = np.linalg.inv(self.image_to_ras_matrix(size))
        ras = np.asarray(ras, dtype=float)
        xy = ras @ m[:2, :3].T + m[:2, 3]
        return xy

    def norm1000_to_ras(self, point: tuple[float, float], size: tuple[int, int] | None = None) -> np.ndarray:
        """RAS of a 0–999 normalised point on the image rendered at `size` (default: the last one)."""
        w, h = size or self.last_size
        xy = np.array([0.5 + point[0] * (w - 1) / 999.0, 0.5 + point[1] * (h - 1) / 999.0])
        return self.image_to_ras(xy, (w, h))

    def ras_to_norm1000(self, ras: np.ndarray, size: tuple[int, int] | None = None) -> np.ndarray:
        """The 0–999 normalised image position of a RAS point's projection."""
        w, h = size or self.last_size
        xy = self.ras_to_image(ras, (w, h))
        return np.array([(xy[0] - 0.5) * 999.0 / max(w - 1, 1), (xy[1] - 0.5) * 999.0 / max(h - 1, 1)])

    def zoom(self, factor: float, anchor_ras: np.ndarray | None = None) -> None:
        """Divide the FOV by `factor`, keeping `anchor_ras` (default: the centre) fixed on screen."""
        if anchor_ras is not None:
            n = self.normal
            anchor = anchor_ras - n * float(n @ (anchor_ras - self.center))
            self.center = anchor + (self.center - anchor) / factor
        self.fov = (self.fov[0] / factor, self.fov[1] / factor)

    def offset_range(self, corners_ras: np.ndarray) -> tuple[float, float]:
        """Canonical offsets of the first and last voxel-centre planes (corners of voxel centres)."""
        proj = corners_ras @ self.axis
        return (float(proj.min()), float(proj.max()))

    def fit(self, box_corners_ras: np.ndarray, size: tuple[int, int] | None = None) -> None:
        """Slicer's FitSliceToAll field of view for the full-voxel box at `size` (default: the last render
        size), centred in-plane on the box; the offset is kept."""
        right, up, n = self.matrix[:, 0], self.matrix[:, 1], self.normal
        pr, pu = box_corners_ras @ right, box_corners_ras @ up
        centre_in_plane = right * (pr.max() + pr.min()) / 2 + up * (pu.max() + pu.min()) / 2
        self.center = centre_in_plane + n * float(n @ self.center)
        self.fov = fitted_fov(box_corners_ras, self.matrix, size or self.last_size)

    def snapshot(self, decimals: int = 6) -> dict[str, object]:
        """JSON-ready state of the view."""
        return {
            "orientation": self.orientation,
            "offset": round(self.offset, decimals),
            "axis": self.axis_label,
            "center_ras": [round(float(v), decimals) for v in self.center],
            "fov_mm": [round(float(v), decimals) for v in self.fov],
            "last_size": list(self.last_size),
        }


# ----- voxel and patient-coordinate rules shared by viewers, operators, case generators and scoring -----

LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0])  # its own inverse: RAS = diag(-1, -1, 1)·LPS and back
_FLIP4 = np.diag([-1.0, -1.0, 1.0, 1.0])


def lps_to_ras(point: np.ndarray | tuple[float, ...] | list[float]) -> np.ndarray:
    """A point (or array of points, last axis 3) from LPS to RAS; the same flip maps RAS to LPS."""
    return np.asarray(point, dtype=float) * np.array([-1.0, -1.0, 1.0])


ras_to_lps = lps_to_ras


def lps_matrix_to_ras(matrix: np.ndarray) -> np.ndarray:
    """A 4×4 homogeneous transform between LPS spaces expressed between RAS spaces (and back)."""
    return _FLIP4 @ np.asarray(matrix, dtype=float) @ _FLIP4


def ijk_to_ras_from_lps(direction: np.ndarray, spacing: np.ndarray, origin: np.ndarray) -> np.ndarray:
    """IJK→RAS 4×4 matrix of an image whose direction cosines (columns) and origin are given in LPS."""
    m = np.eye(4)
    m[:3, :3] = LPS_TO_RAS @ np.asarray(direction, dtype=float) @ np.diag(np.asarray(spacing, dtype=float))
    m[:3, 3] = LPS_TO_RAS @ np.asarray(origin, dtype=float)
    return m


def inside(index: np.ndarray | tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """Whether an (i, j, k) index lies on a grid of `dims` voxels."""
    return all(0 <= int(index[a]) < dims[a] for a in range(len(dims)))


def nearest_voxel(ras_to_ijk: np.ndarray, ras: np.ndarray, dims: tuple[int, int, int]) -> tuple[int, int, int] | None:
    """The voxel whose centre is nearest a RAS point (continuous IJK rounded), None off the grid.

    The one rule by which a point is placed in a voxel: evidence handlers report it and scoring checks it.
    """
    ijk = np.rint((np.asarray(ras_to_ijk, dtype=float) @ np.append(np.asarray(ras, dtype=float), 1.0))[:3])
    index = (int(ijk[0]), int(ijk[1]), int(ijk[2]))
    return index if inside(index, dims) else None


# ----- slide viewport and pyramid rules shared by the embedded slide viewer, the QuPath bridge and scoring -----


def magnification_at(downsample: float, mpp: float | None, objective_power: float | None = None) -> float | None:
    """Magnification shown at a downsample: 10 µm / (mpp × downsample), so 0.25 µm/px at downsample 1 is 40×;
    the slide's objective power only when it has no pixel size; None when neither is known (never guessed)."""
    if mpp is not None:
        return 10.0 / (mpp * downsample)
    return None if objective_power is None else objective_power / downsample


def pyramid_level(level_downsamples: tuple[float, ...] | list[float], downsample: float) -> int:
    """The pyramid level that serves a downsample: the coarsest level not coarser than it (OpenSlide's
    `get_best_level_for_downsample`; views zoomed in beyond level 0 read level 0)."""
    wanted = max(downsample, 1.0)
    return max((i for i, d in enumerate(level_downsamples) if d <= wanted * (1 + 1e-9)), default=0)


@dataclass
class Viewport:
    """Centre (level-0 px), downsample and component size (screen px)."""

    cx: float
    cy: float
    downsample: float
    width: int = 1024
    height: int = 768

    def screen_to_level0(self, sx: float, sy: float) -> tuple[float, float]:
        d = self.downsample
        return (self.cx + (sx - self.width / 2.0) * d, self.cy + (sy - self.height / 2.0) * d)

    def level0_to_screen(self, x: float, y: float) -> tuple[float, float]:
        d = self.downsample
        return ((x - self.cx) / d + self.width / 2.0, (y - self.cy) / d + self.height / 2.0)

    def norm1000_to_level0(self, px: float, py: float) -> tuple[float, float]:
        return self.screen_to_level0(px / 1000.0 * self.width, py / 1000.0 * self.height)

    def level0_to_norm1000(self, x: float, y: float) -> tuple[float, float]:
        sx, sy = self.level0_to_screen(x, y)
        return (sx / self.width * 1000.0, sy / self.height * 1000.0)

    def bounds(self) -> tuple[float, float, float, float]:
        """Visible level-0 rectangle (x0, y0, x1, y1)."""
        x0, y0 = self.screen_to_level0(0.0, 0.0)
        x1, y1 = self.screen_to_level0(float(self.width), float(self.height))
        return (x0, y0, x1, y1)
