"""Standardised uptake values of a PET series from its DICOM tags, by the vendor-neutral QIBA rule.

SUVbw = activity concentration (Bq/ml) × body weight (g) / injected dose decayed to the decay reference time
(Bq), 1 g/ml tissue density (the QIBA vendor-neutral SUV pseudo-code, DICOM PS3.3 PET Image module):
- Units (0054,1001) `BQML`: computed as above; `GML`: the stored values are SUVbw already; `CNTS`: the Philips
  SUV scale factor (7053,1000) of the "Philips PET Private Group" gives SUVbw per stored value; any other
  units (or CNTS without that factor) have no SUV and say why.
- CorrectedImage (0028,0051), when present, must name ATTN and DECY.
- DecayCorrection (0054,1102) `START`: the dose decays with RadionuclideHalfLife from the injection
  (RadiopharmaceuticalStartDateTime, else the scan date with RadiopharmaceuticalStartTime, a day earlier when
  that falls after the scan: injected before midnight, scanned after) to the decay reference: SeriesDate/Time,
  unless it is later than the earliest AcquisitionDate/Time of the series (a series reprocessed or stored after
  the scan), then that earliest acquisition. `ADMIN`: images are decay-corrected to the injection, no decay.
  `NONE` and others: no SUV (each bed position would need its own decay).
- PatientWeight (0010,1030) in kg is required for BQML, and RadionuclideTotalDose (0018,1074) in Bq.
- SUVlbm (lean body mass, Janmahasatian 2005: male 9270·W/(6680 + 216·BMI), female 9270·W/(8780 + 244·BMI),
  BMI = W/H², W kg, H m) and SUVbsa (body surface area, DuBois: 0.007184·W^0.425·H_cm^0.725 m², SUVbsa in
  cm²/ml) when PatientSize (0010,1020, metres) and PatientSex M or F allow: SUVbw × LBM/W and SUVbw × BSA/W.

The loader keeps these inputs with the volume as the file states them, the acquisition time being the earliest
of the series (`copilot.engine.volume.dicom_values`); `volume_suv` reads them from there, a dataset works too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

RADIOPHARM_KEYS = ("RadionuclideTotalDose", "RadionuclideHalfLife", "RadiopharmaceuticalStartTime",
                   "RadiopharmaceuticalStartDateTime")  # fmt: skip
PHILIPS_SUV_KEY = "PhilipsSUVScaleFactor"  # (7053,1000) of the "Philips PET Private Group", kept under this name
_UNDATED = datetime(2000, 1, 1)  # the day given to times of files without dates
_HALF_DAY = timedelta(hours=12)


@dataclass(frozen=True)
class Suv:
    """SUV per stored value (bw, lbm, bsa; None where the tags do not allow it) and why there is none."""

    bw: float | None
    lbm: float | None = None
    bsa: float | None = None
    reason: str = ""
    reference: str = ""  # the decay reference used (e.g. "earliest acquisition 10:15:00")


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


def _date(value: Any) -> datetime | None:
    text = str(value or "").strip()
    if len(text) < 8 or not text[:8].isdigit():
        return None
    try:
        return datetime(int(text[:4]), int(text[4:6]), int(text[6:8]))
    except ValueError:
        return None


def _datetime_value(value: Any) -> datetime | None:
    """A DICOM DT (`YYYYMMDDHHMMSS.FFFFFF&ZZXX`, the offset dropped: all times of a study share it)."""
    text = str(value or "").strip().split("+")[0]
    text = text[:8] + text[8:].split("-")[0]
    day, t = _date(text[:8]), _time(text[8:] or "00")
    return day + t if day is not None and t is not None else None


def _when(date: Any, time: Any, fallback_date: datetime | None) -> datetime | None:
    """A DA + TM pair as a datetime (the fallback day when the date is missing); None without a time."""
    t = _time(time)
    if t is None:
        return None
    return (_date(date) or fallback_date or _UNDATED) + t


def earliest_acquisition(pairs: Iterable[tuple[Any, Any]]) -> tuple[str, str] | None:
    """The earliest (AcquisitionDate, AcquisitionTime) of a series' slices; times without dates that span more
    than half a day are taken to cross midnight (the small hours are the next day)."""
    found = [(d, t, _when(d, t, None)) for d, t in pairs]
    found = [f for f in found if f[2] is not None]
    if not found:
        return None
    if not all(_date(d) for d, _, _ in found):
        stamps = [w for _, _, w in found if w is not None]
        span = max(stamps) - min(stamps) > _HALF_DAY
        found = [(d, t, w + timedelta(days=1) if span and w is not None and w - _UNDATED < _HALF_DAY else w)
                 for d, t, w in found]  # fmt: skip
    d, t, _ = min(found, key=lambda f: f[2] or _UNDATED)
    return str(d or ""), str(t)


def _float(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _reference(ds: Any) -> tuple[datetime, str] | None:
    """The decay reference: series time, or the earliest acquisition when the series time is later."""
    series_day = _date(getattr(ds, "SeriesDate", None)) or _date(getattr(ds, "AcquisitionDate", None))
    series = _when(getattr(ds, "SeriesDate", None), getattr(ds, "SeriesTime", None), series_day)
    acquired = _when(getattr(ds, "AcquisitionDate", None), getattr(ds, "AcquisitionTime", None), series_day)
    if acquired is None:
        acquired = _datetime_value(getattr(ds, "AcquisitionDateTime", None))
    if series is None and acquired is None:
        return None
    if series is None or acquired is None:
        when = series or acquired
        assert when is not None
        return when, ("series" if series else "acquisition") + f" {when:%H:%M:%S}"
    dated = bool(_date(getattr(ds, "SeriesDate", None)) and _date(getattr(ds, "AcquisitionDate", None)))
    later = series > acquired if dated else timedelta(0) < (series - acquired) % timedelta(days=1) < _HALF_DAY
    if later:
        if not dated and acquired > series:
            acquired -= timedelta(days=1)  # acquired before midnight, the series written after it
        return acquired, f"earliest acquisition {acquired:%H:%M:%S} (series time {series:%H:%M:%S} is later)"
    return series, f"series {series:%H:%M:%S}"


def _decayed_dose(ds: Any, drug: Any) -> tuple[float | None, str, str]:
    """(injected dose decayed to the reference time in Bq, reason there is none, reference description)."""
    dose = _float(getattr(drug, "RadionuclideTotalDose", 0))
    half_life = _float(getattr(drug, "RadionuclideHalfLife", 0))
    if dose <= 0:
        return None, "no injected dose", ""
    correction = str(getattr(ds, "DecayCorrection", "") or "").strip().upper()
    if correction == "ADMIN":
        return dose, "", "injection (DecayCorrection ADMIN)"
    if correction != "START":
        return None, f"decay correction {correction or 'missing'} (SUV needs START or ADMIN)", ""
    if half_life <= 0:
        return None, "no radionuclide half-life", ""
    ref = _reference(ds)
    if ref is None:
        return None, "no series or acquisition time", ""
    scan, described = ref
    start = _datetime_value(getattr(drug, "RadiopharmaceuticalStartDateTime", None))
    if start is None:
        t = _time(getattr(drug, "RadiopharmaceuticalStartTime", None))
        if t is None:
            return None, "no injection time", ""
        start = datetime(scan.year, scan.month, scan.day) + t
        if start > scan:
            start -= timedelta(days=1)  # injected before midnight, scanned after it
    elapsed = (scan - start).total_seconds()
    if elapsed < 0:
        return None, "injection after the decay reference time", ""
    return dose * 2.0 ** (-elapsed / half_life), "", described


def _body(ds: Any, weight: float) -> tuple[float | None, float | None]:
    """(lean body mass kg, body surface area cm²) from weight, height (m) and sex; None where they do not allow."""
    height = _float(getattr(ds, "PatientSize", 0))
    sex = str(getattr(ds, "PatientSex", "") or "").strip().upper()
    if weight <= 0 or not 0.3 <= height <= 2.8:
        return None, None
    bsa = 0.007184 * weight**0.425 * (height * 100.0) ** 0.725 * 1e4
    bmi = weight / height**2
    lbm = {"M": 9270.0 * weight / (6680.0 + 216.0 * bmi), "F": 9270.0 * weight / (8780.0 + 244.0 * bmi)}.get(sex)
    return lbm, bsa


def philips_factor_text(ds: Any) -> str | None:
    """The Philips SUV scale factor (7053,1000) as text, when a dataset's Philips PET private block holds one."""
    getter = getattr(ds, "get_private_item", None)
    if getter is None:
        return None
    try:
        value = getter(0x7053, 0x00, "Philips PET Private Group").value
    except (KeyError, ValueError):
        return None
    text = value.decode("ascii", "replace").strip("\0 ") if isinstance(value, bytes) else str(value or "").strip()
    return text or None


def _philips_factor(ds: Any) -> float:
    """The Philips SUV scale factor kept by the loader, or read from a dataset's private block."""
    kept = getattr(ds, PHILIPS_SUV_KEY, None)
    return _float(kept if kept is not None else philips_factor_text(ds) or 0.0)


def suv(ds: Any) -> Suv:
    """The SUVs per stored value of a PET dataset (or a volume's kept inputs), or the reason there are none."""
    units = str(getattr(ds, "Units", "") or "").strip().upper()
    weight = _float(getattr(ds, "PatientWeight", 0))
    reference = ""
    if units == "GML":
        bw = 1.0
    elif units == "CNTS":
        bw = _philips_factor(ds)
        if bw <= 0:
            return Suv(None, reason="units CNTS without the Philips SUV scale factor (7053,1000)")
        reference = "Philips SUV scale factor (7053,1000)"
    elif units != "BQML":
        return Suv(None, reason=f"units {units or 'missing'} (SUV needs BQML, GML or Philips CNTS)")
    else:
        corrected = {str(v).strip().upper() for v in _values(getattr(ds, "CorrectedImage", None))}
        if corrected and not {"ATTN", "DECY"} <= corrected:
            return Suv(None, reason=f"CorrectedImage {'/'.join(sorted(corrected))} lacks ATTN or DECY")
        if weight <= 0:
            return Suv(None, reason="no patient weight")
        seq = getattr(ds, "RadiopharmaceuticalInformationSequence", None)
        decayed, reason, reference = _decayed_dose(ds, seq[0] if seq else None)
        if decayed is None:
            return Suv(None, reason=reason)
        bw = weight * 1000.0 / decayed
    lbm, bsa = _body(ds, weight)
    return Suv(bw, bw * lbm / weight if lbm else None, bw * bsa / (weight * 1000.0) if bsa else None, "", reference)


def _values(value: Any) -> list[Any]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        return value.split("\\")
    return list(value) if isinstance(value, Iterable) else [value]


def suv_factor(ds: Any) -> tuple[float | None, str]:
    """(SUVbw per stored value, '') for a PET dataset, or (None, the reason there is none)."""
    result = suv(ds)
    return result.bw, result.reason


def _from_metadata(meta: Mapping[str, str]) -> Any:
    """A dataset-like view of a volume's metadata (the radiopharmaceutical's facts kept flat beside the rest)."""
    drug = SimpleNamespace(**{k: meta[k] for k in RADIOPHARM_KEYS if k in meta})
    fields = {k: v for k, v in meta.items() if k not in RADIOPHARM_KEYS and k.isidentifier()}
    return SimpleNamespace(**fields, RadiopharmaceuticalInformationSequence=[drug])


def volume_suv(volume: Any) -> Suv:
    """`suv` of a PET volume from the inputs its loader kept (computed once per volume)."""
    cache = getattr(volume, "cache", {})
    if "suv" not in cache:
        cache["suv"] = suv(_from_metadata(getattr(volume, "metadata", {}) or {}))
    result: Suv = cache["suv"]
    return result


def volume_suv_factor(volume: Any) -> tuple[float | None, str]:
    """SUVbw per stored value of a PET volume and the reason when there is none."""
    result = volume_suv(volume)
    return result.bw, result.reason
