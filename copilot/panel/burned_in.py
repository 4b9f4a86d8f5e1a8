"""Series whose pixels may carry patient details: BurnedInAnnotation = YES, and the kinds of image that usually
do (ultrasound, secondary captures, other screen grabs) unless they declare BurnedInAnnotation = NO. Their views
are not sent to a model unless the clinician chose so for that series (`copilot.panel.optin`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.pacs.patient import first_header

BURNED_IN_MODALITIES = {"US": "ultrasound", "SC": "secondary capture", "XC": "external camera photograph",
                        "OT": "other (often a screen grab)", "DOC": "document"}  # fmt: skip
SECONDARY_CAPTURE = "1.2.840.10008.5.1.4.1.1.7"  # and its multi-frame kinds, .7.1 … .7.4


@dataclass(frozen=True)
class BurnedIn:
    """One opened series that may carry burnt-in patient details, and why."""

    series_uid: str
    label: str  # '#3 US abdomen'
    reason: str  # 'BurnedInAnnotation YES', 'modality US (ultrasound)'


def burned_in_reason(ds: Any) -> str:
    """Why a header's series may carry burnt-in details ('' when nothing says so)."""
    flag = str(getattr(ds, "BurnedInAnnotation", "") or "").strip().upper()
    if flag == "YES":
        return "BurnedInAnnotation YES"
    if flag == "NO":
        return ""
    modality = str(getattr(ds, "Modality", "") or "").strip().upper()
    if modality in BURNED_IN_MODALITIES:
        return f"modality {modality} ({BURNED_IN_MODALITIES[modality]})"
    if str(getattr(ds, "SOPClassUID", "") or "").startswith(SECONDARY_CAPTURE):
        return "a secondary capture"
    return ""


def _header(path: Path) -> Any:
    import pydicom

    try:
        return pydicom.dcmread(path, stop_before_pixels=True)
    except Exception:  # not a DICOM file (a NIfTI volume): no header to read
        return None


def burned_in_series(root: str | Path, inputs: dict[str, Any] | None) -> list[BurnedIn]:
    """The opened series of a study that may carry burnt-in patient details."""
    root = Path(root)
    inputs = dict(inputs or {})
    uids: list[str | None] = list(inputs.get("series_uids") or [inputs.get("series_uid")])
    out = []
    for n, rel in enumerate(str(v) for v in inputs.get("volumes", [])):
        p = root / rel
        uid = uids[n] if n < len(uids) else None
        ds = first_header(p, uid) if p.is_dir() else _header(p) if p.is_file() else None
        reason = burned_in_reason(ds) if ds is not None else ""
        if reason:
            number = str(getattr(ds, "SeriesNumber", "") or "")
            label = f"{'#' + number + ' ' if number else ''}{getattr(ds, 'SeriesDescription', '') or rel}"
            out.append(BurnedIn(str(getattr(ds, "SeriesInstanceUID", "") or rel), label, reason))
    return out
