"""DICOM loading: SimpleITK (GDCM) for series, pydicom where SimpleITK cannot read the files.

The pydicom path builds the geometry straight from ImagePositionPatient, ImageOrientationPatient
and PixelSpacing, sorting slices along the slice normal, and applies the rescale slope/intercept.
Every handler speaks RAS millimetres, so a file without those tags is refused (`missing_geometry`)
unless the caller explicitly accepts an assumed geometry (then `metadata["geometry"] == "assumed"`);
a folder holding several series (`mixed_series`), slices of different sizes or orientations
(`inconsistent_series`) and pixel data that cannot be decoded (`undecodable_pixels`) are refused too.
A folder of multi-frame instances (enhanced CT/MR/PET, RT Dose) opens as its file does, or its instances are
put together (`copilot.engine.volume.dicom_multiframe`).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import numpy as np
import pydicom
import pydicom.misc
import SimpleITK as sitk

from copilot.engine.volume import dicom_geometry as geo
from copilot.engine.volume import dicom_multiframe as mf
from copilot.engine.volume.dicom_values import (
    check_not_mosaic,
    dose_scaling,
    pet_series_metadata,
    real_world_values,
    value_metadata,
)
from copilot.engine.volume.image import LPS_TO_RAS, Volume, VolumeLoadError, volume_from_sitk

LPS_TO_RAS_4 = np.diag([-1.0, -1.0, 1.0, 1.0])  # the assumed grid: 1 mm voxels, LPS axes, origin 0

MODALITY_NAMES = {"PT": "PT", "CT": "CT", "MR": "MR"}
GEOMETRY_TAGS = ("ImagePositionPatient", "ImageOrientationPatient", "PixelSpacing")
_GROUP_TAGS = {
    "PlanePositionSequence": "ImagePositionPatient",
    "PlaneOrientationSequence": "ImageOrientationPatient",
    "PixelMeasuresSequence": "PixelSpacing",
}


def missing_geometry(ds: pydicom.Dataset) -> list[str]:
    """The patient-geometry tags a dataset lacks (enhanced multi-frame: looked up in its functional groups)."""
    missing = [t for t in GEOMETRY_TAGS if not ds.get(t)]
    for seq in ("SharedFunctionalGroupsSequence", "PerFrameFunctionalGroupsSequence"):
        for group in list(ds.get(seq) or [])[:1]:
            missing = [t for t in missing if not any(g in group and tag == t for g, tag in _GROUP_TAGS.items())]
    return missing


def _dicm(path: Path) -> bool:
    """True when a file has the DICOM preamble (pydicom's own check)."""
    try:
        return bool(pydicom.misc.is_dicom(path))
    except OSError:
        return False


def _read_header(path: str | Path) -> pydicom.Dataset:
    """Every element but large values (pixel data is skipped, its length kept) and checked for its size."""
    try:
        ds = pydicom.dcmread(str(path), defer_size=4096)
    except (pydicom.errors.InvalidDicomError, OSError, ValueError, EOFError) as exc:
        raise VolumeLoadError(f"{Path(path).name}: not a readable DICOM file ({exc})", "load_failed") from exc
    _check_pixel_length(ds, Path(path).name)
    return ds


def _check_pixel_length(ds: pydicom.Dataset, name: str) -> None:
    """Refuse native pixel data shorter than Rows x Columns x samples x frames (GDCM would pad with zeros)."""
    if "PixelData" not in ds:
        if "FloatPixelData" in ds or "DoubleFloatPixelData" in ds:
            return
        raise VolumeLoadError(f"{name}: a DICOM file has no pixel data", "undecodable_pixels")
    syntax = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
    item = ds.get_item("PixelData")
    length = getattr(item, "length", None)  # a deferred (raw) element knows its length
    if length is None and isinstance(getattr(item, "value", None), bytes | bytearray):
        length = len(item.value)
    if syntax is None or syntax.is_compressed or length in (None, 0xFFFFFFFF):
        return
    try:
        frames = int(getattr(ds, "NumberOfFrames", 1) or 1)
        bits = int(ds.BitsAllocated)
        per_frame = int(ds.Rows) * int(ds.Columns) * int(getattr(ds, "SamplesPerPixel", 1) or 1)
    except (AttributeError, TypeError, ValueError) as exc:
        raise VolumeLoadError(f"{name}: image size tags are missing or invalid ({exc})", "undecodable_pixels") from exc
    expected = (per_frame * frames * bits + 7) // 8
    if length < expected:
        raise VolumeLoadError(
            f"{name}: pixel data holds {length} bytes, its header needs {expected} "
            f"({ds.Rows}x{ds.Columns}, {frames} frame(s), {bits} bits)",
            "undecodable_pixels",
        )


def _check_geometry(ds: pydicom.Dataset, name: str, accept_missing_geometry: bool) -> bool:
    """True when the geometry is assumed (accepted explicitly); refuses a file without geometry otherwise."""
    missing = missing_geometry(ds)
    if missing and not accept_missing_geometry:
        raise VolumeLoadError(
            f"{name}: DICOM without {', '.join(missing)}: its position in RAS millimetres is unknown "
            "(a case may set inputs.accept_missing_geometry to load it with an assumed 1 mm grid at the origin)",
            "missing_geometry",
        )
    return bool(missing)


def _pixels(ds: pydicom.Dataset, name: str) -> np.ndarray:
    """Decoded, rescaled pixels of one dataset, or `undecodable_pixels`."""
    if "PixelData" not in ds and "FloatPixelData" not in ds and "DoubleFloatPixelData" not in ds:
        raise VolumeLoadError(f"{name}: a DICOM file has no pixel data", "undecodable_pixels")
    try:
        arr = ds.pixel_array.astype(np.float32)
    except Exception as exc:  # pydicom/handlers raise many types for damaged or unsupported pixel data
        raise VolumeLoadError(
            f"{name}: pixel data cannot be decoded ({type(exc).__name__}: {str(exc)[:200]})", "undecodable_pixels"
        ) from exc
    slope, intercept = _rescale(ds, arr.shape[0] if arr.ndim == 3 else 1)
    if arr.ndim == 3:
        slope, intercept = slope[:, None, None], intercept[:, None, None]
    else:
        slope, intercept = slope[0], intercept[0]
    return (arr * slope + intercept) * np.float32(dose_scaling(ds))


def _rescale(ds: pydicom.Dataset, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame rescale slope and intercept: the dataset's own tags, else its Pixel Value Transformation
    functional groups (enhanced multi-frame), else identity."""
    if "RescaleSlope" in ds or "RescaleIntercept" in ds:
        values = [(float(getattr(ds, "RescaleSlope", 1) or 1), float(getattr(ds, "RescaleIntercept", 0) or 0))]
    else:
        shared = list(ds.get("SharedFunctionalGroupsSequence") or [])
        per_frame = list(ds.get("PerFrameFunctionalGroupsSequence") or [])
        values = []
        for n in range(frames):
            groups = [per_frame[n]] if n < len(per_frame) else []
            item = next(
                (g.PixelValueTransformationSequence[0] for g in [*groups, *shared[:1]]
                 if g.get("PixelValueTransformationSequence")),
                None,
            )  # fmt: skip
            values.append((float(item.get("RescaleSlope", 1) or 1), float(item.get("RescaleIntercept", 0) or 0))
                          if item is not None else (1.0, 0.0))  # fmt: skip
    arr = np.array(values * (frames if len(values) == 1 else 1), dtype=np.float32)
    return arr[:, 0], arr[:, 1]


def _series_name(ds: pydicom.Dataset, fallback: str) -> str:
    """Scene name of a series: its description (unless it names the patient), else its number, else the folder
    name."""
    desc = str(getattr(ds, "SeriesDescription", "") or "").strip()
    if desc and not names_patient(desc, ds):
        return desc
    number = getattr(ds, "SeriesNumber", None)
    return f"Series {number}" if number is not None else fallback


def _plain_words(text: str) -> list[str]:
    """Words of a text folded (case, accents) for comparison."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c))
    return re.findall(r"[^\W_]+", folded)


def names_patient(text: str, ds: pydicom.Dataset) -> bool:
    """Whether a description holds a word of the patient's name (three letters or more), their ID or the
    accession number, as the header itself gives them: such a description is never drawn on a view nor sent."""
    words = set(_plain_words(text))
    joined = "".join(_plain_words(text))
    name = str(getattr(ds, "PatientName", "") or "").replace("^", " ")
    spelt = "".join({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"}.get(c, c) for c in name.casefold())  # Mueller
    if any(len(w) >= 3 and w in words for w in {*_plain_words(name), *_plain_words(spelt)}):
        return True
    for key in ("PatientID", "AccessionNumber"):
        value = "".join(_plain_words(str(getattr(ds, key, "") or "")))
        if len(value) >= 4 and value in joined:
            return True
    return False


def _modality(ds: pydicom.Dataset) -> str:
    """The file's own Modality (RTDOSE stays RTDOSE); MR only when the tag is absent."""
    value = str(getattr(ds, "Modality", "") or "").strip().upper()
    return MODALITY_NAMES.get(value, value) if value else "MR"


def _metadata(ds: pydicom.Dataset) -> dict[str, str]:
    keys = ("Modality", "SeriesDescription", "SeriesInstanceUID", "StudyInstanceUID", "SeriesNumber")
    out = {k: str(getattr(ds, k)) for k in keys if getattr(ds, k, None) is not None}
    out.update(value_metadata(ds))
    return out


def _dataset(path: str | Path) -> pydicom.Dataset:
    try:
        return pydicom.dcmread(str(path))
    except (pydicom.errors.InvalidDicomError, OSError, ValueError, EOFError) as exc:
        raise VolumeLoadError(f"{Path(path).name}: not a readable DICOM file ({exc})", "load_failed") from exc


def load_dicom_file(path: Path, name: str | None = None, accept_missing_geometry: bool = False) -> Volume:
    """One DICOM file (single- or multi-frame) as a volume."""
    ds = _read_header(path)
    vname = name or _series_name(ds, path.stem)
    check_not_mosaic(ds, vname)
    assumed = _check_geometry(ds, vname, accept_missing_geometry)
    frames = None if assumed else geo.header_frames(ds, vname)
    stored_in_order = True
    if frames is not None:
        order = geo.check_frames(frames[0], frames[1], vname)[0]
        stored_in_order = bool((np.diff(order) == 1).all() or (np.diff(order) == -1).all())
    elif not assumed and ds.get("ImageOrientationPatient"):
        geo.series_frames([ds], vname)
    try:
        if not stored_in_order:  # GDCM stacks frames as stored; pydicom places each at its position
            raise RuntimeError("frames stored out of position order")
        image = sitk.ReadImage(str(path), sitk.sitkFloat32)
        vol = volume_from_sitk(image, vname, modality=_modality(ds), source=str(path))
        if frames is not None:
            geo.verify_placement(vol, frames[0], vname)
        vol = real_world_values(vol, ds)
    except RuntimeError:
        full = _dataset(path)
        if assumed:
            pixels = _pixels(full, vname)
            vol = Volume(vname, pixels if pixels.ndim == 3 else pixels[None], LPS_TO_RAS_4, _modality(full), str(path))
        elif frames is not None:
            vol = volume_from_frames(full, frames, vname, str(path))
        else:
            vol = volume_from_datasets([full], vname, source=str(path))
    vol.metadata.update(_metadata(ds))
    if assumed:
        vol.metadata["geometry"] = "assumed"
    return vol


def load_dicom_series(
    folder: Path, name: str | None = None, series_uid: str | None = None, accept_missing_geometry: bool = False
) -> Volume:
    """The one (or the given) series in a folder, read with SimpleITK, pydicom as fallback.

    A folder holding several series is refused (`mixed_series`) unless `series_uid` picks one.
    """
    reader = sitk.ImageSeriesReader()
    uids = list(reader.GetGDCMSeriesIDs(str(folder)) or [])
    others = [u for u in uids if u != series_uid] if series_uid is not None else []
    if series_uid is not None:
        if series_uid not in uids:
            raise VolumeLoadError(f"series {series_uid} not found in {folder.name}", "not_found")
        uids = [series_uid]
    if len(uids) > 1:
        raise VolumeLoadError(
            f"{folder.name} holds {len(uids)} DICOM series ({', '.join(u[-12:] for u in uids[:4])}…): "
            "put each series in its own folder",
            "mixed_series",
        )
    files: list[str] = []
    if uids:
        files = list(reader.GetGDCMSeriesFileNames(str(folder), uids[0]))
    if not files:
        files = sorted(str(p) for p in folder.iterdir() if p.is_file())
    if not files:
        raise VolumeLoadError(f"no DICOM files in {folder.name}", "not_found")
    dicom_files = {str(p) for p in folder.iterdir() if p.is_file() and (p.suffix.lower() == ".dcm" or _dicm(p))}
    picked_over = {f for u in others for f in reader.GetGDCMSeriesFileNames(str(folder), u)}  # other series
    left_out = sorted(dicom_files - set(files) - picked_over)
    if uids and left_out:  # GDCM leaves out slices it cannot use (no pixel data, broken header)
        raise VolumeLoadError(
            f"{folder.name}: {len(left_out)} DICOM file(s) are not usable slices of the series "
            f"(first: {Path(left_out[0]).name}; missing or damaged pixel data or header)",
            "undecodable_pixels",
        )
    first = _read_header(files[0])
    vname = name or _series_name(first, folder.name)
    headers = [first, *(_read_header(f) for f in files[1:])]
    series = {str(h.get("SeriesInstanceUID", "")) for h in headers}
    if len(series) > 1:
        raise VolumeLoadError(
            f"{folder.name} holds {len(series)} DICOM series: put each in its own folder", "mixed_series"
        )
    if mf.check_mixture(headers, vname):  # enhanced multi-frame or RT Dose: each file as it opens on its own
        parts = [load_dicom_file(Path(f), vname, accept_missing_geometry) for f in files]
        vol = mf.assemble(parts, headers, vname, str(folder))
        vol.metadata.update(parts[0].metadata)
        if vol.metadata.get("Modality") == "PT":
            vol.metadata.update(pet_series_metadata(headers))
        return vol
    assumed = any(_check_geometry(h, vname, accept_missing_geometry) for h in headers)
    _check_consistent(headers, vname)
    for h in headers:
        check_not_mosaic(h, vname)
    frames = None if assumed else geo.series_frames(headers, vname)
    if frames is not None and len(headers) > 1:
        geo.check_frames(frames[0], frames[1], vname)
    if len(headers) == 1 and not assumed:
        frames = geo.header_frames(first, vname) or frames
        if frames is not None:
            geo.check_frames(frames[0], frames[1], vname)
    try:
        if assumed and len(files) > 1:
            raise RuntimeError("slice order needs positions")
        reader.SetFileNames(files)
        reader.SetOutputPixelType(sitk.sitkFloat32)
        vol = volume_from_sitk(reader.Execute(), vname, modality=_modality(first), source=str(folder))
        if frames is not None:
            geo.verify_placement(vol, frames[0], vname)
        vol = real_world_values(vol, first)
    except RuntimeError:
        datasets = [_dataset(f) for f in files]
        if assumed:
            datasets.sort(key=lambda d: int(getattr(d, "InstanceNumber", 0) or 0))
            data = np.stack([_pixels(d, vname) for d in datasets])
            vol = Volume(vname, data, LPS_TO_RAS_4, _modality(first), str(folder))
        else:
            vol = volume_from_datasets(datasets, vname, source=str(folder))
    vol.metadata.update(_metadata(first))
    if vol.metadata.get("Modality") == "PT":
        vol.metadata.update(pet_series_metadata(headers))
    if assumed:
        vol.metadata["geometry"] = "assumed"
    return vol


def _check_consistent(headers: list[pydicom.Dataset], name: str) -> None:
    """Refuse slices of different sizes or orientations in one series."""
    sizes = {(int(getattr(h, "Rows", 0) or 0), int(getattr(h, "Columns", 0) or 0)) for h in headers}
    if len(sizes) > 1:
        raise VolumeLoadError(f"{name}: slices of different sizes {sorted(sizes)} in one series", "inconsistent_series")
    orients = {
        tuple(round(float(v), 4) for v in np.concatenate(geo.plane_axes(h.ImageOrientationPatient, name)[:2]))
        for h in headers
        if h.get("ImageOrientationPatient")
    }
    if len(orients) > 1:
        raise VolumeLoadError(
            f"{name}: slices with {len(orients)} different orientations in one series", "inconsistent_series"
        )


def volume_from_datasets(datasets: list[pydicom.Dataset], name: str, source: str = "") -> Volume:
    """Build a volume from single-frame datasets using their patient-space geometry (pydicom)."""
    if not datasets:
        raise VolumeLoadError(f"{name}: no slices")
    first = datasets[0]
    for d in datasets:
        _check_geometry(d, name, False)
    _check_consistent(datasets, name)
    frames = geo.series_frames(datasets, name)
    if frames is None:
        raise VolumeLoadError(
            f"{name}: a slice lacks ImagePositionPatient or ImageOrientationPatient", "missing_geometry"
        )
    positions, iop = frames
    row_dir, col_dir, normal = geo.plane_axes(iop, name)
    spacing_rc = geo.pixel_spacing(first.get("PixelSpacing"), name)
    order, slice_step = geo.check_slice_positions(positions, normal, name)
    datasets = [datasets[int(i)] for i in order]
    if len(datasets) == 1:
        slice_step = float(getattr(first, "SpacingBetweenSlices", 0) or getattr(first, "SliceThickness", 1) or 1)
    data = np.stack([_pixels(d, name) for d in datasets])  # [k, row(j), column(i)]
    ras = _affine(row_dir, col_dir, normal, spacing_rc, slice_step, positions[order[0]])
    vol = Volume(name=name, data=data, ijk_to_ras=ras, modality=_modality(first), source=source)
    vol.metadata.update(_metadata(first))
    if vol.metadata.get("Modality") == "PT":
        vol.metadata.update(pet_series_metadata(datasets))
    return vol


def _affine(
    row_dir: np.ndarray,
    col_dir: np.ndarray,
    normal: np.ndarray,
    spacing_rc: tuple[float, float],
    step: float,
    origin: np.ndarray,
) -> np.ndarray:
    """IJK→RAS of slices along `normal`: column index i advances along the row direction by PixelSpacing[1]."""
    lps = np.eye(4)
    lps[:3, 0] = row_dir * spacing_rc[1]
    lps[:3, 1] = col_dir * spacing_rc[0]
    lps[:3, 2] = normal * step
    lps[:3, 3] = origin
    ras = np.eye(4)
    ras[:3, :] = LPS_TO_RAS @ lps[:3, :]
    return ras


def volume_from_frames(ds: pydicom.Dataset, frames: tuple[np.ndarray, np.ndarray], name: str, source: str) -> Volume:
    """A multi-frame dataset as a volume at its per-frame positions (pydicom, when GDCM cannot read it)."""
    positions, iop = frames
    row_dir, col_dir, normal = geo.plane_axes(iop, name)
    order, step = geo.check_slice_positions(positions, normal, name)
    pixels = _pixels(ds, name)
    pixels = pixels if pixels.ndim == 3 else pixels[None]
    if len(pixels) != len(positions):
        raise VolumeLoadError(f"{name}: {len(pixels)} frames for {len(positions)} positions", "inconsistent_series")
    spacing_rc = geo.frame_pixel_spacing(ds, name)
    if len(positions) == 1:
        step = float(getattr(ds, "SpacingBetweenSlices", 0) or getattr(ds, "SliceThickness", 1) or 1)
    ras = _affine(row_dir, col_dir, normal, spacing_rc, step, positions[order[0]])
    return Volume(name=name, data=pixels[order], ijk_to_ras=ras, modality=_modality(ds), source=source)
