"""File → Stored results of this study: the study folder's segmentations and reports, each under the series it was
made on — a SEG of a series shown opens as its overlay, a report as its panel (the clinician's choice, traced by the
panel it opens); those that stay on the PACS are listed, greyed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtGui import QAction

from copilot.panel.derived import Derived, study_derived


def derived_file(item: Derived) -> Path | None:
    """The first file of a derived series in its folder (None when it stays on the PACS)."""
    import pydicom

    if item.folder is None:
        return None
    for f in sorted(p for p in item.folder.iterdir() if p.is_file()):
        try:
            if str(pydicom.dcmread(f, stop_before_pixels=True).SeriesInstanceUID) == item.uid:
                return f
        except Exception:  # not DICOM: skipped
            continue
    return None


def install(window: Any, menu: Any) -> None:
    """A "Stored results of this study" submenu filled each time it opens."""
    stored = menu.addMenu("Stored results of this study")
    stored.aboutToShow.connect(lambda: fill(window, stored))
    window.stored_menu = stored


def fill(window: Any, menu: Any) -> list[QAction]:
    """The submenu's entries for the study shown (its SEGs on the series shown first, then the rest)."""
    from copilot.gui.report_dock import open_report
    from copilot.gui.seg_dock import open_seg

    menu.clear()
    case = window.model.case if window.model is not None else None
    root = Path(str(getattr(case, "root", "") or "")) if case is not None else None
    found = study_derived(root) if root is not None and root.is_dir() else []
    inputs = dict(getattr(case, "inputs", None) or {})
    shown = {str(u) for u in (inputs.get("series_uid"), *(inputs.get("series_uids") or ())) if u}
    found.sort(key=lambda d: not (d.modality == "SEG" and shown & set(d.source_series)))
    actions: list[QAction] = []
    for item in found:
        on_shown = bool(shown & set(item.source_series))
        title = item.title + (" — over the series shown" if item.modality == "SEG" and on_shown else "")
        action = QAction(title, menu)
        path = derived_file(item)
        if item.modality == "SEG" and path is not None and on_shown:
            action.triggered.connect(lambda _=False, p=path: open_seg(window, p))
        elif item.modality == "SR" and path is not None:
            action.triggered.connect(lambda _=False, p=path: open_report(window, p))
        else:
            action.setEnabled(False)  # on the PACS, on another series, or no kind the desktop shows yet
        menu.addAction(action)
        actions.append(action)
    if not actions:
        menu.addAction("(no stored results)").setEnabled(False)
    return actions
