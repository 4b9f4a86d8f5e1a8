"""Volumes in RAS: voxel data plus an IJK→RAS affine, loaded with SimpleITK (pydicom as fallback).

ITK/DICOM/NIfTI-through-SimpleITK geometry is LPS; it is converted to RAS once, here, by
RAS = diag(-1, -1, 1)·LPS. The voxel array is never resampled: only the affine changes.
"""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from copilot.engine.geometry import LPS_TO_RAS, ijk_to_ras_from_lps
from copilot.engine.geometry import nearest_voxel as _nearest_voxel

_ADDRESS = re.compile(r"\(0x[0-9a-fA-F]+\)")
VOLUME_SUFFIXES = (".nii.gz", ".nii", ".nrrd", ".nhdr", ".mha", ".mhd")


class VolumeLoadError(ValueError):
    """A file or folder could not be read as an image volume; `code` names the reason for callers.

    Codes: `load_failed` (unreadable), `truncated_image`, `missing_geometry`, `invalid_geometry`, `mixed_series`,
    `inconsistent_series`, `irregular_slice_spacing`, `gantry_tilt`, `mosaic_image`, `invalid_values`,
    `undecodable_pixels`, `not_found`, `multiframe_series`.
    """

    def __init__(self, message: str, code: str = "load_failed") -> None:
        super().__init__(message)
        self.code = code


def finite_range(data: np.ndarray, chunk: int = 1 << 20) -> tuple[float, float]:
    """The smallest and largest finite value, (0, 0) when none is: a chunk at a time, so that a volume at the
    voxel budget is never copied whole to find it."""
    flat = data.reshape(-1)
    low, high = np.inf, -np.inf
    for start in range(0, flat.size, chunk):
        part = flat[start : start + chunk]
        part = part[np.isfinite(part)]
        if part.size:
            low, high = min(low, float(part.min())), max(high, float(part.max()))
    return (float(low), float(high)) if low <= high else (0.0, 0.0)


@dataclass(eq=False)
class Volume:
    """A scalar volume: `data[k, j, i]` (float32) and the 4×4 IJK→RAS matrix."""

    name: str
    data: np.ndarray
    ijk_to_ras: np.ndarray
    modality: str = "MR"
    source: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    cache: dict[object, object] = field(default_factory=dict, repr=False)  # derived values (voxels never change)

    def __post_init__(self) -> None:
        self.data = np.ascontiguousarray(self.data, dtype=np.float32)
        self.ijk_to_ras = np.array(self.ijk_to_ras, dtype=float)
        self.ijk_to_ras[np.abs(self.ijk_to_ras) < 1e-12] = 0.0  # denormal cosines break ITK's matrix inverse
        if self.data.ndim != 3 or 0 in self.data.shape:
            raise VolumeLoadError(f"{self.name}: expected a non-empty 3D image, got shape {self.data.shape}")
        det = np.linalg.det(self.ijk_to_ras[:3, :3]) if np.isfinite(self.ijk_to_ras).all() else 0.0
        if abs(det) < 1e-12:
            raise VolumeLoadError(
                f"{self.name}: voxel geometry is degenerate (zero spacing or axes)", "invalid_geometry"
            )
        self.ras_to_ijk = np.linalg.inv(self.ijk_to_ras)
        self.value_range = finite_range(self.data)
        self.cache.clear()

    @property
    def dimensions(self) -> tuple[int, int, int]:
        """Size along I, J, K."""
        k, j, i = self.data.shape
        return (i, j, k)

    @property
    def spacing(self) -> tuple[float, float, float]:
        """Voxel size along I, J, K in mm."""
        m = self.ijk_to_ras[:3, :3]
        return tuple(float(np.linalg.norm(m[:, a])) for a in range(3))  # type: ignore[return-value]

    @property
    def direction(self) -> np.ndarray:
        """Unit RAS direction of each IJK axis (columns)."""
        m = self.ijk_to_ras[:3, :3]
        return m / np.linalg.norm(m, axis=0)

    def corners_ras(self) -> np.ndarray:
        """RAS positions of the 8 corner voxel centres, shape (8, 3)."""
        i, j, k = (d - 1 for d in self.dimensions)
        ijk = np.array([[a, b, c, 1.0] for a in (0, i) for b in (0, j) for c in (0, k)])
        return (self.ijk_to_ras @ ijk.T).T[:, :3]

    def center_ras(self) -> np.ndarray:
        """RAS position of the volume centre."""
        return self.corners_ras().mean(axis=0)

    def ras_to_ijk_point(self, ras: np.ndarray) -> np.ndarray:
        """Continuous IJK of a RAS point."""
        return (self.ras_to_ijk @ np.append(np.asarray(ras, dtype=float), 1.0))[:3]

    def ijk_to_ras_point(self, ijk: np.ndarray) -> np.ndarray:
        """RAS of a continuous IJK position."""
        return (self.ijk_to_ras @ np.append(np.asarray(ijk, dtype=float), 1.0))[:3]

    def nearest_voxel(self, ras: np.ndarray) -> tuple[int, int, int] | None:
        """Nearest voxel index (i, j, k) of a RAS point, or None when outside the volume."""
        return _nearest_voxel(self.ras_to_ijk, ras, self.dimensions)


def inventory_facts(volume: Volume) -> dict[str, Any]:
    """What the scene inventory says beyond geometry: an assumed grid, the value units, the 4D frame shown."""
    meta = volume.metadata
    facts: dict[str, Any] = {"geometry": "assumed"} if meta.get("geometry") == "assumed" else {}
    if "units" in meta:
        facts["units"] = meta["units"]
    if "frames" in meta:
        facts["frame"], facts["frames"] = int(meta["frame"]), int(meta["frames"])
    return facts


def affine_from_sitk(image: sitk.Image | sitk.ImageFileReader) -> np.ndarray:
    """IJK→RAS 4×4 matrix of a SimpleITK image, or of a reader's image information (geometry in LPS)."""
    direction = np.array(image.GetDirection(), dtype=float).reshape(3, 3)
    return ijk_to_ras_from_lps(direction, np.array(image.GetSpacing()), np.array(image.GetOrigin()))


def volume_from_sitk(image: sitk.Image, name: str, modality: str = "MR", source: str = "") -> Volume:
    """Wrap a 3D scalar SimpleITK image as a RAS volume (2D images become one-slice volumes)."""
    if image.GetNumberOfComponentsPerPixel() != 1:
        raise VolumeLoadError(f"{name}: only scalar images are supported")
    if image.GetDimension() == 2:
        image = sitk.JoinSeries(image)
    if image.GetDimension() != 3:
        raise VolumeLoadError(f"{name}: expected a 3D image, got {image.GetDimension()}D")
    data = sitk.GetArrayFromImage(image).astype(np.float32, copy=False)
    return Volume(name=name, data=data, ijk_to_ras=affine_from_sitk(image), modality=modality, source=source)


def pick_frame(image: sitk.Image, name: str, frame: int | None) -> tuple[sitk.Image, int]:
    """One 3D frame of a 4D image (and the frame count; 1 for a 3D image); a frame out of range is refused."""
    if image.GetDimension() != 4:
        if frame not in (None, 0):
            raise VolumeLoadError(f"{name} has one frame; frame {frame} does not exist", "not_found")
        return image, 1
    count = image.GetSize()[3]
    index = 0 if frame is None else frame
    if not 0 <= index < count:
        raise VolumeLoadError(
            f"{name} has {count} frames (0 to {count - 1}); frame {index} does not exist", "not_found"
        )
    size = [*image.GetSize()[:3], 0]
    return sitk.Extract(image, size, [0, 0, 0, index]), count


def volume_to_sitk(volume: Volume) -> sitk.Image:
    """The inverse of `volume_from_sitk`: a SimpleITK image in LPS geometry."""
    image = sitk.GetImageFromArray(volume.data)
    m = LPS_TO_RAS @ volume.ijk_to_ras[:3, :3]
    spacing = np.linalg.norm(m, axis=0)
    image.SetSpacing(tuple(float(s) for s in spacing))
    image.SetDirection(tuple(float(v) for v in (m / spacing).ravel()))
    image.SetOrigin(tuple(float(v) for v in LPS_TO_RAS @ volume.ijk_to_ras[:3, 3]))
    return image


def sitk_image(volume: Volume) -> sitk.Image:
    """The volume as a SimpleITK image, made once per volume (kept in its cache)."""
    image = volume.cache.get("sitk")
    if image is None:
        image = volume.cache["sitk"] = volume_to_sitk(volume)
    return image  # type: ignore[return-value]


def volume_name_for(path: Path) -> str:
    """Scene name for a file: its name without the image suffix."""
    name = path.name
    for suffix in (*VOLUME_SUFFIXES, ".dcm"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def guess_modality(name: str) -> str:
    """Modality from a series name (PET, CT or MR)."""
    lower = name.lower()
    if "pet" in lower or lower.startswith("pt") or "suv" in lower:
        return "PT"
    if lower.startswith("ct") or "_ct" in lower or lower == "ct":
        return "CT"
    return "MR"


def sitk_reason(exc: Exception) -> str:
    """The informative line of a SimpleITK/ITK error (ITK's last line is often a generic errno text)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    keys = ("not read completely", "fread", "Unable to determine", "ERROR", "error")
    for key in keys:
        for line in lines:
            if key in line:
                return _ADDRESS.sub("", line.replace("sitk::ERROR: ", ""))[:300]
    return _ADDRESS.sub("", lines[-1] if lines else type(exc).__name__)[:300]


def _raw_nifti_header(path: Path) -> Any:
    """The header exactly as stored (nibabel's repairs switched off: pixdim 0 stays 0, vox_offset stays)."""
    import io

    import nibabel as nib

    opener: Any = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        head = fh.read(540)
    sizes = (int.from_bytes(head[:4], "little"), int.from_bytes(head[:4], "big"))
    cls = nib.Nifti2Header if 540 in sizes else nib.Nifti1Header
    return cls.from_fileobj(io.BytesIO(head), check=False)


SHEAR_TOLERANCE = 1e-4  # |cos| between two voxel axes beyond which a grid is sheared (ITK refuses such a sform)


def check_nifti_geometry(header: Any, name: str) -> None:
    """Refuse a NIfTI header whose voxel size or orientation is zero, negative, degenerate or not finite
    (`invalid_geometry`): ITK would replace them by 1 mm or the identity; and one whose only transform, the sform,
    shears the grid (`sheared_grid`), which ITK refuses with a raw error."""
    ndim = int(header["dim"][0])
    pixdim = np.asarray(header["pixdim"], dtype=float)[1 : 1 + min(max(ndim, 1), 3)]
    if not np.isfinite(pixdim).all() or (pixdim <= 0).any():
        raise VolumeLoadError(
            f"{name}: voxel size (pixdim) {pixdim.tolist()} must be positive and finite", "invalid_geometry"
        )
    if int(header["qform_code"]) > 0:
        q = np.array([float(header[k]) for k in ("quatern_b", "quatern_c", "quatern_d")])
        offs = np.array([float(header[k]) for k in ("qoffset_x", "qoffset_y", "qoffset_z")])
        if not np.isfinite(q).all() or not np.isfinite(offs).all() or float(q @ q) > 1.0 + 1e-6:
            raise VolumeLoadError(
                f"{name}: the qform quaternion {q.tolist()} / offset {offs.tolist()} is not a rotation",
                "invalid_geometry",
            )
    if int(header["sform_code"]) > 0:
        srow = np.array([header["srow_x"], header["srow_y"], header["srow_z"]], dtype=float)
        if not np.isfinite(srow).all() or abs(float(np.linalg.det(srow[:, :3]))) < 1e-12:
            raise VolumeLoadError(
                f"{name}: the sform {srow.tolist()} is not finite or is degenerate", "invalid_geometry"
            )
        if int(header["qform_code"]) <= 0:  # the sform alone places the grid: it must not shear it
            axes = srow[:, :3] / np.linalg.norm(srow[:, :3], axis=0)
            cosines = np.abs(axes.T @ axes - np.eye(3))
            if float(cosines.max()) > SHEAR_TOLERANCE:
                angle = float(np.degrees(np.arccos(min(1.0, float(cosines.max())))))
                raise VolumeLoadError(
                    f"{name}: its sform shears the voxel grid (axes {angle:.1f}° apart, not 90°) and it has no "
                    "qform: a sheared grid cannot be shown as acquired; save it resampled to an orthogonal grid, or "
                    "with a qform",
                    "sheared_grid",
                )


def check_nifti_complete(path: Path) -> Any:
    """Refuse a NIfTI file whose voxel data is shorter than its header says (ITK would fill with zeros), or
    whose voxel size or orientation is invalid; the header as stored. A compressed stream is inflated no further
    than the header promises (a small file that inflates to gigabytes is never read to its end)."""
    try:
        header: Any = _raw_nifti_header(path)
        shape = header.get_data_shape()
        itemsize = header.get_data_dtype().itemsize
        offset = float(header["vox_offset"])
    except (EOFError, OSError, zlib.error) as exc:
        raise VolumeLoadError(
            f"{path.name} is truncated or corrupt: the compressed stream ends early ({exc})", "truncated_image"
        ) from exc
    except Exception as exc:  # nibabel raises several types for a damaged header
        raise VolumeLoadError(f"cannot read {path.name}: not a valid NIfTI header ({exc})", "load_failed") from exc
    if not np.isfinite(offset) or offset < 0:
        raise VolumeLoadError(f"{path.name}: voxel data offset {offset} is not a valid position", "truncated_image")
    expected = int(offset) + int(np.prod(shape, dtype=np.int64)) * itemsize
    size = path.stat().st_size
    if path.name.lower().endswith(".gz"):
        size = 0
        try:
            with gzip.open(path, "rb") as fh:
                while size < expected and (chunk := fh.read(1 << 20)):  # no further than the header promises
                    size += len(chunk)
        except (EOFError, OSError, zlib.error) as exc:
            raise VolumeLoadError(
                f"{path.name} is truncated or corrupt: the compressed stream ends early ({exc})", "truncated_image"
            ) from exc
    if size < expected:
        raise VolumeLoadError(
            f"{path.name} is truncated: its header promises {expected} bytes of image {list(shape)} "
            f"from byte {int(offset)}, the file holds {size}",
            "truncated_image",
        )
    check_nifti_geometry(header, path.name)
    return header
