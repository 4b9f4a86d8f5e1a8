"""Standardised uptake value (SUV, body weight) of a PET series, from its DICOM tags.

SUVbw = activity concentration (Bq/ml) × body weight (g) / injected dose decayed to the scan's reference
time (Bq), with 1 g/ml tissue density, as the QIBA FDG-PET profile and the DICOM PET module define it:
- Units (0054,1001) `BQML`: computed; `GML`: the stored values are already SUVbw; anything else
  (`CNTS`, `PROPCNTS`, …): no SUV.
- DecayCorrection (0054,1102) `START`: the dose is decayed from the injection time
  (RadiopharmaceuticalStartDateTime, else RadiopharmaceuticalStartTime) to the series time (SeriesDate/Time,
  else the acquisition time) with RadionuclideHalfLife; `ADMIN`: images are corrected to the injection time,
  no decay; `NONE`: decayed to the acquisition time.
- PatientWeight (0010,1030) in kg and RadionuclideTotalDose (0018,1074) in Bq must be present and positive.

The loader keeps these inputs with the volume as the file states them (`copilot.engine.volume.dicom_values`);
`volume_suv_factor` reads them from there, a dataset works as well.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

RADIOPHARM_KEYS = ("RadionuclideTotalDose", "RadionuclideHalfLife", "RadiopharmaceuticalStartTime",
                   "RadiopharmaceuticalStartDateTime")  # fmt: skip


def _time(value: Any) -> timedelta | None:
    """A DICOM TM (`HHMMSS.FFFFFF`, `HHMM`, `HH:MM:SS` of old files) as time since midnight."""
    text = str(value or "").strip().replace(":", "")
    if len(text) < 2 or not text[:2].isdigit():
        return None
    try:
        hours = int(text[0:2])
        minutes = int(text[2:4]) if len(text) >= 4 else 0
        seconds = float(text[4:]) if len(text) > 4 else 0.0
    except ValueError:
        return None
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


def _datetime(date: Any, time: Any) -> datetime | None:
    """A DA + TM pair (or a DT in `date` with `time` None) as a naive datetime; None when unreadable."""
    text = str(date or "").strip()
    if time is None:  # a DT: YYYYMMDDHHMMSS.FFFFFF&ZZXX (the offset is dropped: both times share it)
        text = text.split("+")[0].split("-")[0]
        date, time = text[:8], text[8:]
        text = date
    if len(text) != 8 or not text.isdigit():
        return None
    t = _time(time)
    if t is None:
        return None
    return datetime(int(text[:4]), int(text[4:6]), int(text[6:8])) + t


def _interval(ds: Any, drug: Any, reference: str) -> float | None:
    """Seconds from injection to the reference time (`series` or `acquisition`)."""
    date = getattr(ds, "SeriesDate", None) if reference == "series" else getattr(ds, "AcquisitionDate", None)
    time = getattr(ds, "SeriesTime", None) if reference == "series" else getattr(ds, "AcquisitionTime", None)
    if time is None and reference == "series":
        date, time = getattr(ds, "AcquisitionDate", None), getattr(ds, "AcquisitionTime", None)
    scan_dt = _datetime(date, time) if date else None
    start_dt = _datetime(getattr(drug, "RadiopharmaceuticalStartDateTime", None), None)
    if scan_dt is not None and start_dt is not None:
        return (scan_dt - start_dt).total_seconds()
    scan_t, start_t = _time(time), _time(getattr(drug, "RadiopharmaceuticalStartTime", None))
    if scan_t is None or start_t is None:
        return None
    seconds = (scan_t - start_t).total_seconds()
    return seconds + 86400.0 if seconds < 0 else seconds  # injected before midnight, scanned after


def suv_factor(ds: Any) -> tuple[float | None, str]:
    """(SUVbw per stored unit, '') for a PET dataset, or (None, the reason there is none)."""
    units = str(getattr(ds, "Units", "") or "").strip().upper()
    if units == "GML":
        return 1.0, ""
    if units != "BQML":
        return None, f"units {units or 'missing'} (SUV needs BQML)"
    try:
        weight = float(getattr(ds, "PatientWeight", 0) or 0)
    except (TypeError, ValueError):
        weight = 0.0
    if not (weight > 0 and math.isfinite(weight)):
        return None, "no patient weight"
    seq = getattr(ds, "RadiopharmaceuticalInformationSequence", None)
    drug = seq[0] if seq else None
    try:
        dose = float(getattr(drug, "RadionuclideTotalDose", 0) or 0)
        half_life = float(getattr(drug, "RadionuclideHalfLife", 0) or 0)
    except (TypeError, ValueError):
        dose = half_life = 0.0
    if not (dose > 0 and math.isfinite(dose)):
        return None, "no injected dose"
    correction = str(getattr(ds, "DecayCorrection", "START") or "START").strip().upper()
    decay = 1.0
    if correction in ("START", "NONE"):
        if not (half_life > 0 and math.isfinite(half_life)):
            return None, "no radionuclide half-life"
        elapsed = _interval(ds, drug, "series" if correction == "START" else "acquisition")
        if elapsed is None:
            return None, "no injection or scan time"
        decay = 2.0 ** (-elapsed / half_life)
    elif correction != "ADMIN":
        return None, f"decay correction {correction} not understood"
    return weight * 1000.0 / (dose * decay), ""


def _from_metadata(meta: Mapping[str, str]) -> Any:
    """A dataset-like view of a volume's metadata (the radiopharmaceutical's facts kept flat beside the rest)."""
    drug = SimpleNamespace(**{k: meta[k] for k in RADIOPHARM_KEYS if k in meta})
    fields = {k: v for k, v in meta.items() if k not in RADIOPHARM_KEYS and k.isidentifier()}
    return SimpleNamespace(**fields, RadiopharmaceuticalInformationSequence=[drug])


def volume_suv_factor(volume: Any) -> tuple[float | None, str]:
    """`suv_factor` of a PET volume from the inputs its loader kept (computed once per volume)."""
    cache = getattr(volume, "cache", {})
    if "suv_bw" not in cache:
        cache["suv_bw"] = suv_factor(_from_metadata(getattr(volume, "metadata", {}) or {}))
    result: tuple[float | None, str] = cache["suv_bw"]
    return result
