"""The opening observation of a study conversation, from the session's own inventory.

Radiology: per series its name, modality, size in voxels, spacing, the patient directions of the voxel axes and
the field of view; slides: size in pixels, µm per pixel, levels and their downsamples, full magnification. The
acquisition date is shown to the clinician (it stays on this machine) and never put in the model's text. Text
read from the study (a series' name) reaches the model cleaned, cut and inside a labelled `<study-data>` block.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from copilot.kinds import viewer_kind
from copilot.tools.study_text import block, clean

AXIS_LETTERS = (("L", "R"), ("P", "A"), ("I", "S"))  # RAS axis → (negative, positive) direction letters


def axis_codes(ijk_to_ras: list[list[float]]) -> str:
    """Where the voxel axes i, j, k point in the patient, e.g. 'RAS' or 'LPS' (nearest patient axis)."""
    m = np.asarray(ijk_to_ras, dtype=float)[:3, :3]
    out = ""
    for col in range(3):
        v = m[:, col]
        axis = int(np.argmax(np.abs(v)))
        out += AXIS_LETTERS[axis][1 if v[axis] > 0 else 0]
    return out


def radiology_lines(inventory: list[dict[str, Any]], for_model: bool = True) -> list[str]:
    """One line per series; for the model (the default) the lines, which carry the study's own text, come inside
    a labelled data block."""
    lines = []
    for v in inventory:
        dims, sp = v["dimensions"], v["spacing_mm"]
        fov = [round(d * s, 1) for d, s in zip(dims, sp, strict=True)]
        assumed = "; geometry assumed (no orientation in the file)" if v.get("geometry") == "assumed" else ""
        lines.append(
            f"- series {json.dumps(clean(v['name']), ensure_ascii=False)} (volume id {v['id']}, "
            f"{clean(v['modality'], 16)}): {dims[0]}x{dims[1]}x{dims[2]} voxels, "
            f"spacing {' x '.join(f'{s:g}' for s in sp)} mm, field of view {' x '.join(f'{f:g}' for f in fov)} mm, "
            f"voxel axes i,j,k point {axis_codes(v['ijk_to_ras'])}, stored values {v['value_range'][0]:g} to "
            f"{v['value_range'][1]:g}{assumed}"
        )
    return block(lines) if for_model and lines else lines


def slide_lines(state: dict[str, Any]) -> list[str]:
    if not state.get("image_open"):
        return ["- no slide is open"]
    w, h = state["dimensions"]
    mpp = state.get("mpp")
    mpp_text = f"{mpp[0]:g} x {mpp[1]:g} µm/px" if mpp else "no pixel size in the file (µm/px unknown)"
    downs = ", ".join(f"{d:g}" for d in state.get("level_downsamples", []))
    return [
        f"- slide: {w} x {h} px at level 0, {mpp_text}, {state['levels']} levels (downsamples {downs})",
        f"- the view shows level-0 region {state['visible_region']} at magnification {state.get('magnification')}",
    ]


def acquisition_dates(root: Path, inputs: dict[str, Any]) -> list[str]:
    """Acquisition (else series, else study) date of the opened DICOM series, for the clinician's eyes only."""
    import pydicom

    from copilot.panel.studies import dicom_series

    out = []
    for rel in inputs.get("volumes", []):
        p = (Path(root) / str(rel)).resolve()
        if not p.is_dir():
            continue
        for s in dicom_series(p):
            if inputs.get("series_uid") not in (None, s.uid):
                continue
            first = next((f for f in sorted(s.folder.iterdir()) if f.is_file()), None)
            try:
                ds = pydicom.dcmread(first, stop_before_pixels=True) if first else None
            except Exception:  # an unreadable neighbour: no date shown
                ds = None
            date = next((str(getattr(ds, k)) for k in ("AcquisitionDate", "SeriesDate", "StudyDate")
                         if ds is not None and getattr(ds, k, None)), "")  # fmt: skip
            if date:
                out.append(f"{s.title}: acquired {date[:4]}-{date[4:6]}-{date[6:8]}")
    return out


def study_summary(session: Any, case: Any) -> list[str]:
    """What the clinician sees of the opened study before the first question: the inventory, and the
    acquisition date of a DICOM series (local only; the model never gets it)."""
    if viewer_kind(session.kind).slide_coordinates:
        return slide_lines(session.snapshot())
    inventory = session.call("get_viewer_state", {"include_volumes": True}, actor="system")
    lines = radiology_lines(inventory.result.get("inventory", []) if inventory.ok else [], for_model=False)
    try:
        dates = acquisition_dates(Path(case.root), dict(case.inputs or {}))
    except OSError:  # a folder that went away: no date
        dates = []
    return lines + [f"- {d} (shown here only; never sent to the model)" for d in dates]
