"""Run-time workflow guards: warnings carried in a handler's result (`result["warnings"]`), so the model sees
them at once and the trace records them.

A guard never refuses or changes a call; it names a workflow fault the paper's failure analysis reports:
- `unregistered_fusion`: fusing volumes of different frames of reference that no registration links;
- `superseded_node`: using a volume id after a registered copy of it replaced it (a stale node);
- `off_source_series`: taking evidence on a series other than the task's designated source series;
- `unobserved_evidence`: recording a key slice or point on a plane no returned image ever showed.
The pathology counterparts are in `slide_guards.py`.

A volume's frame of reference is, in order: set by an operator that produced it (registered output: the
fixed volume's frame), the case's `inputs.frames_of_reference` (volume name → frame), or a DICOM
FrameOfReferenceUID in its metadata; unknown frames never warn.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from copilot.tools.registry import RadiologyContext

FRAME_KEY = "frame_of_reference"
SUPERSEDES_KEY = "supersedes"
TOL_MM = 0.51
MAX_PLANES = 4000


def warn(result: dict[str, Any], code: str, message: str) -> None:
    result.setdefault("warnings", []).append({"code": code, "message": message})


def frame_of(ctx: RadiologyContext, vid: str) -> str | None:
    vol = ctx.viewer.volume(vid)
    md = getattr(vol, "metadata", {}) or {}
    if md.get(FRAME_KEY):
        return str(md[FRAME_KEY])
    frames = ctx.case_inputs.get("frames_of_reference") or {}
    if vol.name in frames:
        return str(frames[vol.name])
    for key in ("FrameOfReferenceUID", "frame_of_reference_uid"):
        if md.get(key):
            return str(md[key])
    return None


def mark_derived(ctx: RadiologyContext, volume: Any, frame_from: str, supersedes: str | None = None) -> None:
    """An operator's output volume: its frame is `frame_from`'s; optionally it replaces `supersedes`."""
    frame = frame_of(ctx, frame_from)
    if frame:
        volume.metadata[FRAME_KEY] = frame
    if supersedes:
        volume.metadata[SUPERSEDES_KEY] = supersedes


def superseded_by(ctx: RadiologyContext, vid: str) -> str | None:
    for other in ctx.viewer.volume_ids():
        if (getattr(ctx.viewer.volume(other), "metadata", {}) or {}).get(SUPERSEDES_KEY) == vid:
            return other
    return None


def check_fusion(ctx: RadiologyContext, bg: str, fg: str | None, result: dict[str, Any]) -> None:
    """Warn on fusing unregistered frames and on fusing a volume that a registered copy superseded."""
    if fg is None:
        return
    name = {v: ctx.viewer.volume(v).name for v in (bg, fg)}
    fb, ff = frame_of(ctx, bg), frame_of(ctx, fg)
    if fb and ff and fb != ff:
        warn(
            result,
            "unregistered_fusion",
            f"{name[bg]} (frame {fb}) and {name[fg]} (frame {ff}) have different frames of reference and no "
            "registration links them: the fused view does not overlay corresponding anatomy. Register them "
            "(register_volumes, then apply_transform) and fuse the registered volume.",
        )
    for vid in (bg, fg):
        newer = superseded_by(ctx, vid)
        if newer:
            warn(
                result,
                "superseded_node",
                f"{name[vid]} ({vid}) was superseded by its registered copy {ctx.viewer.volume(newer).name} "
                f"({newer}); this call still uses the old node.",
            )


def source_series(ctx: RadiologyContext) -> str | None:
    """The task's designated evidence series (case.json `prompt.source_series`), if the task has one."""
    if "source_series" not in ctx.memo:
        value = None
        if ctx.case_root is not None and (ctx.case_root / "case.json").is_file():
            data = json.loads((ctx.case_root / "case.json").read_text(encoding="utf-8"))
            value = (data.get("prompt") or {}).get("source_series")
        ctx.memo["source_series"] = value
    source: str | None = ctx.memo["source_series"]
    return source


def check_source_series(ctx: RadiologyContext, vid: str, result: dict[str, Any]) -> None:
    src = source_series(ctx)
    name = ctx.viewer.volume(vid).name
    if src and name != src:
        warn(
            result,
            "off_source_series",
            f"this evidence is taken on {name}, but the task's evidence must come from the source series {src}: "
            f"call select_volume(volume_name='{src}') before reading key slices or converting points.",
        )


def note_rendered(ctx: RadiologyContext, view: str, offset: float | None = None) -> None:
    """Remember a plane returned to the model as an image (axis, offset, centre, field of view)."""
    v = ctx.viewer.view(view)
    off = v.offset if offset is None else float(offset)
    planes = ctx.memo.setdefault("planes", [])
    centre = v.center + (off - v.offset) * v.normal
    planes.append((v.axis_label, round(off, 4), np.round(centre, 4), tuple(float(f) for f in v.fov)))
    del planes[:-MAX_PLANES]


_IN_PLANE = {"S": (0, 1), "R": (1, 2), "A": (0, 2)}
_AXIS = {"R": 0, "A": 1, "S": 2}


def check_observed_offset(ctx: RadiologyContext, axis: str, offset: float, result: dict[str, Any]) -> None:
    if not any(a == axis and abs(o - offset) <= TOL_MM for a, o, _, _ in ctx.memo.get("planes", [])):
        warn(
            result,
            "unobserved_evidence",
            f"no image returned so far showed the {axis} = {offset:.1f} mm plane: look at the slice before citing it.",
        )


def check_observed_point(ctx: RadiologyContext, ras: np.ndarray, result: dict[str, Any]) -> None:
    for axis, off, centre, fov in ctx.memo.get("planes", []):
        if abs(ras[_AXIS[axis]] - off) > TOL_MM:
            continue
        if all(abs(ras[i] - centre[i]) <= fov[n] / 2 + TOL_MM for n, i in enumerate(_IN_PLANE[axis])):
            return
    warn(
        result,
        "unobserved_evidence",
        f"RAS [{ras[0]:.1f}, {ras[1]:.1f}, {ras[2]:.1f}] lies on no plane an image returned so far showed: "
        "look at it before citing it.",
    )
