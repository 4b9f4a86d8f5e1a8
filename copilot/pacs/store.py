"""Results back to the PACS a study came from (STOW-RS), for the export handlers.

The handler writes its file into the trace's `derived/` folder first; when the session's study came from a
PACS and the object belongs to that study, it is stored there too and `derived/pacs_stored.jsonl` records what
went where (the URLs stay in the trace folder; the model is told only that it was stored). A refusal removes
the file again, so a failed export changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pydicom

from copilot.pacs.client import PacsClient

MANIFEST = "pacs_stored.jsonl"


def stored_manifest(folder: Path | None) -> list[dict[str, Any]]:
    """What earlier exports of a session stored on a PACS (from its `derived/` folder)."""
    path = Path(folder) / MANIFEST if folder is not None else None
    if path is None or not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def store_back(
    origin: dict[str, Any] | None, datasets: Sequence[pydicom.Dataset], written: Sequence[Path]
) -> dict[str, Any]:
    """Store `datasets` (already written as `written`) to the origin's PACS; what to add to the handler's result.

    Not from a PACS: `{"stored_to": "file"}`. From a PACS but of another study (e.g. an imported local series):
    the file only, said so. On any PACS failure the written files are removed and `PacsError` is raised.
    """
    if not origin or not origin.get("dicomweb"):
        return {"stored_to": "file"}
    study = str(origin.get("study", ""))
    if any(str(ds.StudyInstanceUID) != study for ds in datasets):
        return {"stored_to": "file", "pacs_note": "not stored to the PACS: the source series is not of its study"}
    try:
        stored = PacsClient(str(origin["dicomweb"])).store(datasets, study)
    except Exception:
        for path in written:
            Path(path).unlink(missing_ok=True)
        raise
    manifest = Path(written[0]).parent / MANIFEST if written else None
    if manifest is not None:
        with manifest.open("a", encoding="utf-8") as fh:
            for path, item in zip(written, stored, strict=False):
                fh.write(json.dumps({"file": Path(path).name, **item}, sort_keys=True) + "\n")
    return {"stored_to": "pacs", "pacs_instances_stored": len(stored)}


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
