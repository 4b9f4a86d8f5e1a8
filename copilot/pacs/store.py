"""Results back to the PACS a study came from (STOW-RS), for the export handlers.

The handler writes its file into the trace's `derived/` folder first; when the session's study came from a
PACS and the object belongs to that study, it is stored there too and `derived/pacs_stored.jsonl` records what
went where (the URLs stay in the trace folder; the model is told only that it was stored). An object is stored
only when the study, series and frame of reference it refers to are those of the study the patient banner shows
(recorded as the origin's `shown` UIDs when the study was opened); otherwise it is refused by name. A refusal
removes the file again, so a failed export changes nothing. Written files are owner-only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pydicom

from copilot.errors import HandlerError
from copilot.pacs.client import PacsClient
from copilot.privatefs import make_private, open_private, private_dir

MANIFEST = "pacs_stored.jsonl"


def stored_manifest(folder: Path | None) -> list[dict[str, Any]]:
    """What earlier exports of a session stored on a PACS (from its `derived/` folder)."""
    path = Path(folder) / MANIFEST if folder is not None else None
    if path is None or not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def store_target(origin: dict[str, Any] | None, study_uids: Sequence[str]) -> str | None:
    """The DICOMweb URL `store_back` would store objects of these studies to, or None (a file only)."""
    if not origin or not origin.get("dicomweb"):
        return None
    study = str(origin.get("study", ""))
    return str(origin["dicomweb"]) if study_uids and all(str(u) == study for u in study_uids) else None


def store_back(
    origin: dict[str, Any] | None, datasets: Sequence[pydicom.Dataset], written: Sequence[Path]
) -> dict[str, Any]:
    """Store `datasets` (already written as `written`) to the origin's PACS; what to add to the handler's result.

    Not from a PACS: `{"stored_to": "file"}`. From a PACS but referring to another study, series or frame of
    reference than the one shown: HandlerError `wrong_study`, the files removed. On any PACS failure the written
    files are removed and `PacsError` is raised.
    """
    for path in written:  # exports are patient data: owner-only, whatever the umask
        private_dir(Path(path).parent)
        make_private(path)
    if not origin or not origin.get("dicomweb"):
        return {"stored_to": "file"}
    study = str(origin.get("study", ""))
    try:
        check_shown_study(origin, datasets)
        stored = PacsClient(str(origin["dicomweb"])).store(datasets, study)
    except Exception:
        for path in written:
            Path(path).unlink(missing_ok=True)
        raise
    manifest = Path(written[0]).parent / MANIFEST if written else None
    if manifest is not None:
        with open_private(manifest, "a") as fh:
            for path, item in zip(written, stored, strict=False):
                fh.write(json.dumps({"file": Path(path).name, **item}, sort_keys=True) + "\n")
    return {"stored_to": "pacs", "pacs_instances_stored": len(stored)}


def referenced_uids(ds: pydicom.Dataset) -> tuple[set[str], set[str], set[str]]:
    """The study, series and frame of reference UIDs an SR or SEG refers to: its own study, the series of its
    evidence or source images, and its frame of reference (a SEG's own, an SR's spatial coordinates')."""
    studies, series, frames = {str(ds.StudyInstanceUID)}, set(), set()
    for item in getattr(ds, "CurrentRequestedProcedureEvidenceSequence", []):
        studies.add(str(item.StudyInstanceUID))
        series |= {str(s.SeriesInstanceUID) for s in getattr(item, "ReferencedSeriesSequence", [])}
    series |= {str(s.SeriesInstanceUID) for s in getattr(ds, "ReferencedSeriesSequence", [])}
    if "FrameOfReferenceUID" in ds:
        frames.add(str(ds.FrameOfReferenceUID))
    pending = list(getattr(ds, "ContentSequence", []))
    while pending:
        item = pending.pop()
        if "ReferencedFrameOfReferenceUID" in item:
            frames.add(str(item.ReferencedFrameOfReferenceUID))
        pending.extend(getattr(item, "ContentSequence", []))
    return studies, series, frames


def check_shown_study(origin: dict[str, Any], datasets: Sequence[pydicom.Dataset]) -> None:
    """Refuse (`wrong_study`) an object whose study, series or frame of reference is not the study the banner shows
    (the origin's study and its `shown` series and frames); names no UID, since the model reads the refusal."""
    shown = origin.get("shown") or {}
    study = str(shown.get("study") or origin.get("study", ""))
    for ds in datasets:
        studies, series, frames = referenced_uids(ds)
        if studies != {study}:
            problem = "it refers to another study than the one open"
        elif shown.get("series") and not series <= set(shown["series"]):
            problem = "it refers to a series that is not of the study open"
        elif shown.get("frames") and not frames <= set(shown["frames"]):
            problem = "its frame of reference is not that of the study open"
        else:
            continue
        raise HandlerError(
            "wrong_study", f"not stored to the PACS: {problem} (the patient banner's); nothing was written"
        )


def stored_html(folder: Path | None) -> str:
    """An HTML list linking what a session stored on a PACS (its WADO-RS URLs); '' when nothing was stored."""
    import html

    items = stored_manifest(folder)
    if not items:
        return ""
    rows = "".join(
        f'<li><a href="{html.escape(str(m.get("url", "")))}">{html.escape(str(m.get("file", "")))}</a> '
        f"<code>{html.escape(str(m.get('sop_instance_uid', '')))}</code></li>"
        for m in items
    )
    return f"<h2>Stored in the PACS</h2><ul>{rows}</ul>"
