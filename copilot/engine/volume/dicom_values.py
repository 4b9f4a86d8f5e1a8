"""Real-world values of DICOM pixels and the facts that go with them.

- RescaleSlope/RescaleIntercept: applied by the reader (GDCM, or pydicom on the fallback path).
- RT Dose: pixels × DoseGridScaling (GDCM leaves it out), units from DoseUnits (`GY` → Gy, or RELATIVE).
- PET: the inputs of a standardized uptake value are kept as they are (Units, CorrectedImage, DecayCorrection,
  PatientWeight, PatientSize, PatientSex, the radiopharmaceutical's dose, half-life and start time, SeriesDate/
  Time, the Philips SUV scale factor (7053,1000)) with the earliest AcquisitionDate/Time of the series (its
  slices, or the frames of a multi-frame file); `copilot.engine.volume.suv` computes the SUV from them.
- WindowCenter/WindowWidth (first pair) are kept: the file's window is the first display.
- A Siemens mosaic (ImageType MOSAIC, or the CSA NumberOfImagesInMosaic element (0019,100A)) tiles many
  slices in one frame; it is refused (`mosaic_image`) rather than shown as one tile sheet. Splitting it needs
  the CSA slice normal and order; convert it first (for example with dcm2niix).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pydicom

from copilot.engine.volume.image import Volume, VolumeLoadError
from copilot.engine.volume.suv import PHILIPS_SUV_KEY, earliest_acquisition, philips_factor_text

_PET_KEYS = (
    "Units",
    "DecayCorrection",
    "CorrectedImage",
    "PatientWeight",
    "PatientSize",
    "PatientSex",
    "SeriesTime",
    "AcquisitionTime",
    "AcquisitionDate",
    "SeriesDate",
)
_RADIOPHARM_KEYS = (
    "Radiopharmaceutical",
    "RadionuclideTotalDose",
    "RadionuclideHalfLife",
    "RadiopharmaceuticalStartTime",
    "RadiopharmaceuticalStartDateTime",
)
_MOSAIC_TAG = (0x0019, 0x100A)  # Siemens CSA: NumberOfImagesInMosaic


def _text(value: Any) -> str:
    if isinstance(value, pydicom.multival.MultiValue | list | tuple):
        return "\\".join(str(v) for v in value)
    return str(value)


def dose_scaling(ds: pydicom.Dataset) -> float:
    """DoseGridScaling of an RT Dose (1 for other modalities); non-finite or non-positive values are refused."""
    if str(ds.get("Modality", "")).upper() != "RTDOSE" or ds.get("DoseGridScaling") in (None, ""):
        return 1.0
    try:
        scale = float(ds.DoseGridScaling)
    except (TypeError, ValueError) as exc:
        raise VolumeLoadError(f"DoseGridScaling {ds.DoseGridScaling!r} is not a number", "invalid_values") from exc
    if not np.isfinite(scale) or scale <= 0:
        raise VolumeLoadError(f"DoseGridScaling {scale} must be positive", "invalid_values")
    return scale


def units(ds: pydicom.Dataset) -> str | None:
    """Units of the real-world values: Gy for RT Dose, the PET Units tag, HU for CT (or its RescaleType)."""
    modality = str(ds.get("Modality", "")).upper()
    if modality == "RTDOSE":
        unit = str(ds.get("DoseUnits", "") or "").upper()
        return {"GY": "Gy", "RELATIVE": "relative"}.get(unit, unit or None)
    if modality == "PT" and ds.get("Units"):
        return str(ds.Units)
    if modality == "CT":
        return str(ds.get("RescaleType") or "HU")
    return None


def value_metadata(ds: pydicom.Dataset) -> dict[str, str]:
    """The value facts a dataset carries, as strings: units, rescale, dose scaling, PET SUV inputs, window."""
    out: dict[str, str] = {}
    unit = units(ds)
    if unit:
        out["units"] = unit
    keys: tuple[str, ...] = ("RescaleSlope", "RescaleIntercept", "RescaleType")
    modality = str(ds.get("Modality", "")).upper()
    if modality == "RTDOSE":
        keys += ("DoseGridScaling", "DoseUnits", "DoseType", "DoseSummationType")
    if modality == "PT":
        keys += _PET_KEYS
        info = list(ds.get("RadiopharmaceuticalInformationSequence") or [])
        if info:
            out.update({k: _text(info[0].get(k)) for k in _RADIOPHARM_KEYS if info[0].get(k) not in (None, "")})
    out.update({k: _text(ds.get(k)) for k in keys if ds.get(k) not in (None, "")})
    if modality == "PT":
        out.update(pet_series_metadata([ds]))
    window = _window(ds)
    if window is not None:
        out["WindowCenter"], out["WindowWidth"] = (f"{v:g}" for v in window)
    return out


def _acquisitions(ds: pydicom.Dataset) -> list[tuple[str, str]]:
    """(date, time) of every acquisition a dataset states: its own tags, else its AcquisitionDateTime, and the
    FrameAcquisitionDateTime of each frame of an enhanced multi-frame file."""
    found: list[tuple[str, str]] = []
    if ds.get("AcquisitionTime"):
        found.append((str(ds.get("AcquisitionDate") or ""), str(ds.AcquisitionTime)))
    stamps = [ds.get("AcquisitionDateTime")] + [
        item.get("FrameAcquisitionDateTime")
        for frame in list(ds.get("PerFrameFunctionalGroupsSequence") or [])
        for item in list(frame.get("FrameContentSequence") or [])[:1]
    ]
    found += [(str(v)[:8], str(v)[8:].split("+")[0].split("-")[0]) for v in stamps if v and len(str(v)) > 8]
    return found


def pet_series_metadata(headers: list[pydicom.Dataset]) -> dict[str, str]:
    """The earliest AcquisitionDate/Time of a PET series' headers and the Philips SUV scale factor."""
    out: dict[str, str] = {}
    first = earliest_acquisition(pair for h in headers for pair in _acquisitions(h))
    if first is not None:
        out["AcquisitionDate"], out["AcquisitionTime"] = first
        if not out["AcquisitionDate"]:
            del out["AcquisitionDate"]
    factor = philips_factor_text(headers[0]) if headers else None
    if factor is not None:
        out[PHILIPS_SUV_KEY] = factor
    return out


def _window(ds: pydicom.Dataset) -> tuple[float, float] | None:
    """The first WindowCenter/WindowWidth pair when both are finite and the width is at least 1."""
    centre, width = ds.get("WindowCenter"), ds.get("WindowWidth")
    if centre in (None, "") or width in (None, ""):
        return None
    try:
        c = float(centre[0] if isinstance(centre, pydicom.multival.MultiValue) else centre)
        w = float(width[0] if isinstance(width, pydicom.multival.MultiValue) else width)
    except (TypeError, ValueError, IndexError):
        return None
    return (c, w) if np.isfinite(c) and np.isfinite(w) and w >= 1 else None


def real_world_values(vol: Volume, ds: pydicom.Dataset) -> Volume:
    """The volume with RT Dose scaling applied (the same volume when there is nothing to apply)."""
    scale = dose_scaling(ds)
    if scale == 1.0:
        return vol
    out = Volume(vol.name, vol.data * np.float32(scale), vol.ijk_to_ras, vol.modality, vol.source)
    out.metadata.update(vol.metadata)
    return out


def check_not_mosaic(ds: pydicom.Dataset, name: str) -> None:
    """Refuse a Siemens mosaic (`mosaic_image`): one frame holding a grid of slices."""
    image_type = [str(v).upper() for v in (ds.get("ImageType") or [])]
    count = ds.get(_MOSAIC_TAG)
    if "MOSAIC" in image_type or count is not None:
        value = getattr(count, "value", None)
        if isinstance(value, bytes):
            value = int.from_bytes(value[:2], "little") if len(value) >= 2 else None
        n = f" of {value}" if isinstance(value, int) else ""
        raise VolumeLoadError(
            f"{name}: a Siemens mosaic (a grid{n} slices in one image); convert it to a volume first "
            "(for example with dcm2niix), it is not shown as a tile sheet",
            "mosaic_image",
        )
