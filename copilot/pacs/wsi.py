"""DICOM whole-slide series (VL Whole Slide Microscopy): which file the slide viewer opens."""

from __future__ import annotations

from pathlib import Path

from copilot.engine.volume.headers import is_dicom

WSI_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.77.1.6"
MAX_FILES = 2000


def dicom_wsi_file(folder: str | Path) -> Path | None:
    """The level-0 instance (the largest VOLUME image) when every DICOM image under a folder belongs to one
    whole-slide series; None otherwise (a radiology series, a mixed folder, no DICOM). OpenSlide finds the
    other levels, the label and the overview beside it."""
    import pydicom

    best: tuple[int, Path] | None = None
    series: set[str] = set()
    files = [f for f in sorted(Path(folder).rglob("*")) if f.is_file() and f.name != "origin.json"][:MAX_FILES]
    for f in files:
        if not is_dicom(f):
            continue
        try:
            ds = pydicom.dcmread(f, stop_before_pixels=True)
        except Exception:  # an unreadable file among the images: not for the slide viewer to decide
            continue
        if str(getattr(ds, "SOPClassUID", "")) != WSI_SOP_CLASS:
            return None
        series.add(str(getattr(ds, "SeriesInstanceUID", "")))
        flavour = list(getattr(ds, "ImageType", []) or [])
        if len(flavour) > 2 and flavour[2] != "VOLUME":
            continue  # a label or an overview image
        size = int(getattr(ds, "TotalPixelMatrixColumns", 0) or 0) * int(getattr(ds, "TotalPixelMatrixRows", 0) or 0)
        if best is None or size > best[0]:
            best = (size, f)
    return best[1] if best is not None and len(series) == 1 else None
