"""Radiology viewer-control handlers: the names and arguments of Table 9 of the MedFlow paper."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import Field

import copilot
from copilot.engine.volume.display import PRESET_NAMES
from copilot.engine.volume.loading import expand_case_path, load_case_volumes
from copilot.engine.volume.render import encode_apng
from copilot.engine.volume.view_rules import FUSION_MODES, LAYOUT_ALIASES, LAYOUTS
from copilot.errors import HandlerError
from copilot.tools import guards
from copilot.tools.args import (
    DEFAULT_SIZE,
    MAX_OFFSET_MM,
    RAS,
    BBox1000,
    Point1000,
    Size,
    View,
    ViewLiteral,
    ViewOrAll,
    VolumeId,
    VolumeName,
    canonical_view,
    ras_report,
    ref_to_volume,
    render_views,
    resolve_case_path,
    screen_point,
    views_for,
    volume_ref,
)
from copilot.tools.registry import HandlerOutput, ImageOut, RadiologyContext, Registry

RADIOLOGY = Registry("radiology")
handler = RADIOLOGY.handler
if TYPE_CHECKING:  # the names are only known at run time, where they become the schema's enum
    LayoutName = str
    PresetName = str
else:
    LayoutName = Literal[tuple(list(LAYOUTS) + list(LAYOUT_ALIASES))]
    PresetName = Literal[PRESET_NAMES]
MAX_KEYFRAMES = 6
MAX_CINE_FRAMES = 60


def _views_out(ctx: RadiologyContext, view: str | None, size: int, result: dict[str, Any]) -> HandlerOutput:
    return HandlerOutput(result=result, images=render_views(ctx, views_for(ctx, view), size))


@handler(role="viewer_control")
def ping(ctx: RadiologyContext) -> HandlerOutput:
    """Check that the viewer server is responding."""
    return HandlerOutput(
        {
            "status": "ok",
            "server": "medcopilot",
            "version": copilot.__version__,
            "viewer": ctx.viewer.kind,
            "volumes": len(ctx.viewer.volume_ids()),
        }
    )


@handler(role="viewer_control")
def open_case(
    ctx: RadiologyContext,
    dicom_dir: Annotated[
        str | None,
        Field(
            max_length=1024,
            description="Case path to open (a DICOM folder, a "
            "volume file or a folder of volumes) relative to the case root; omitted: the case's "
            "own inputs.",
        ),
    ] = None,
    spacing: Annotated[
        float | None,
        Field(
            gt=0,
            le=50,
            description="Slice spacing in mm used by scroll; omitted: the volume's own spacing along each view.",
        ),
    ] = None,
    slice_planes: Annotated[
        list[ViewLiteral] | None,
        Field(max_length=3, description="Views to return; omitted: axial, sagittal and coronal."),
    ] = None,
    view_layout: Annotated[LayoutName | None, Field(description="Layout to set after opening.")] = None,
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Open (or recover) a case with the standard viewer preset; returns baseline views and the scene inventory."""
    if dicom_dir is None:
        requested = [str(p) for p in ctx.case_inputs.get("volumes", [])]
        paths = [resolve_case_path(ctx, p) for p in requested]
        if not paths:
            raise HandlerError("invalid_arguments", "this case lists no inputs; give dicom_dir")
    else:
        requested = [dicom_dir]
        paths = [resolve_case_path(ctx, dicom_dir)]
    sources = [resolve_case_path(ctx, str(src)) for p in paths for src in expand_case_path(p)]
    series_uid = ctx.case_inputs.get("series_uid") if dicom_dir is None else None  # a study's picked series
    frame = ctx.case_inputs.get("frame") if dicom_dir is None else None  # a study's frame of a 4D file
    assumed = ctx.case_inputs.get("accept_missing_geometry") is True
    uids = ctx.case_inputs.get("series_uids") if dicom_dir is None else None  # several series of a study, in order
    if isinstance(uids, list) and len(uids) == len(sources):
        volumes = [v for src, uid in zip(sources, uids, strict=True) for v in load_case_volumes([src], assumed, uid)]
    else:
        volumes = load_case_volumes(sources, assumed, series_uid, frame)
    viewer = ctx.viewer
    viewer.clear()
    viewer.set_slice_step(spacing)
    ids = [viewer.add_volume(v) for v in volumes]
    default = ctx.case_inputs.get("default_volume") if dicom_dir is None else None
    first = next((i for i in ids if viewer.volume(i).name == default), ids[0])
    viewer.recover_standard_views(first)
    if view_layout is not None:
        viewer.set_layout(view_layout)
    planes = tuple(dict.fromkeys(canonical_view(p) for p in (slice_planes or ["red", "yellow", "green"])))
    result = {"opened": requested, "inventory": viewer.inventory(), "active_volume": first}
    return HandlerOutput(result, render_views(ctx, planes, size))


@handler(role="viewer_control")
def select_volume(
    ctx: RadiologyContext,
    volume_id: VolumeId = None,
    volume_name: VolumeName = None,
    view: ViewOrAll = "all",
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Show an already loaded volume (e.g. another MRI sequence, CT or PET) in every view; returns the standard views.

    Slice positions are kept when they lie inside the selected volume, so sequences can be compared
    at the same place; otherwise the standard views are recovered around the volume centre.
    """
    if volume_id is None and volume_name is None:
        raise HandlerError("invalid_arguments", "give volume_id or volume_name")
    vid = volume_ref(ctx, volume_id, volume_name)
    viewer = ctx.viewer
    viewer.select_volume(vid)
    vol = viewer.volume(vid)
    lo, hi = vol.corners_ras().min(axis=0) - 1e-6, vol.corners_ras().max(axis=0) + 1e-6
    centre = viewer.view("red").center
    if np.any(centre < lo) or np.any(centre > hi):
        viewer.recover_standard_views(vid)
    return _views_out(ctx, view, size, {"active_volume": vid, "active_volume_name": vol.name})


@handler(role="viewer_control")
def observe(
    ctx: RadiologyContext,
    view: ViewOrAll = None,
    size: Size = DEFAULT_SIZE,
    include_metadata: Annotated[bool, Field(description="Also return the scene inventory and viewer state.")] = False,
) -> HandlerOutput:
    """Return the current axial, sagittal and coronal views (those of the layout), or one selected view."""
    result: dict[str, Any] = {}
    if include_metadata:
        result = {"inventory": ctx.viewer.inventory(), "viewer_state": ctx.viewer.state()}
    return _views_out(ctx, view, size, result)


@handler(role="viewer_control", hints={"idempotentHint": False})  # a move relative to where it is
def scroll(
    ctx: RadiologyContext,
    view: View = "red",
    direction: Annotated[
        Literal["up", "down"], Field(description="up: increasing offset (towards S, R or A); down: decreasing.")
    ] = "up",
    num_slices: Annotated[int, Field(ge=1, le=1000, description="Number of slices to move.")] = 1,
    step: Annotated[
        float | None, Field(gt=0, le=50, description="Slice step in mm; omitted: the slice spacing.")
    ] = None,
    output: Annotated[
        Literal["keyframes", "cine", "final"],
        Field(
            description="keyframes: a few sampled frames; "
            "cine: an animated PNG of every frame; final: only the last view."
        ),
    ] = "keyframes",
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Scroll through slices and return sampled keyframes or a cine; stops at the first/last slice."""
    name = canonical_view(view)
    viewer = ctx.viewer
    lo, hi = viewer.slice_offset_range(name)
    dstep = (step or viewer.slice_step(name)) * (1 if direction == "up" else -1)
    start = viewer.view(name).offset
    offsets = [min(max(start + dstep * n, lo), hi) for n in range(1, num_slices + 1)]
    target = offsets[-1]
    clamped = abs(start + dstep * num_slices - target) > 1e-9
    images: list[ImageOut] = []
    if output == "cine":
        picks = _sample(offsets, MAX_CINE_FRAMES)
        frames = []
        for off in picks:
            viewer.set_slice_offset(name, off)
            frames.append(viewer.render(name, (size, size)))
            guards.note_rendered(ctx, name)
        images.append(ImageOut(view=name, data=encode_apng(frames), mime="image/apng", label="cine"))
        shown = picks
    else:
        count = 1 if output == "final" else min(MAX_KEYFRAMES, len(offsets))
        shown = [offsets[round((i + 1) * len(offsets) / count) - 1] for i in range(count)]
        for off in shown:
            viewer.set_slice_offset(name, off)
            images.extend(render_views(ctx, (name,), size))
    viewer.set_slice_offset(name, target)
    result = {
        "view": name,
        "axis": viewer.view(name).axis_label,
        "from_offset": round(start, 6),
        "to_offset": round(target, 6),
        "clamped": clamped,
        "frame_offsets": [round(o, 6) for o in shown],
    }
    return HandlerOutput(result, images)


def _sample(values: list[float], count: int) -> list[float]:
    """At most `count` evenly spaced items, always including the last one."""
    if len(values) <= count:
        return values
    return [values[round(i * (len(values) - 1) / (count - 1))] for i in range(count)]


@handler(role="viewer_control", hints={"idempotentHint": False})  # a move relative to where it is
def zoom(
    ctx: RadiologyContext,
    view: View = "red",
    factor: Annotated[
        float, Field(gt=0, le=100, description="Relative zoom: 2 halves the field of view, 0.5 doubles it.")
    ] = 2.0,
    center_1000: Annotated[
        list[Annotated[float, Field(ge=0, le=999)]] | None,
        Field(
            min_length=2,
            max_length=2,
            description="[x, y] 0–999 point kept fixed on screen while zooming; omitted: the image centre.",
        ),
    ] = None,
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Zoom a slice view relative to its current field of view and return the updated view."""
    name = canonical_view(view)
    anchor = None
    if center_1000 is not None:
        anchor = ctx.viewer.point_to_ras(name, (center_1000[0], center_1000[1]))
    ctx.viewer.zoom(name, factor, anchor)
    return _views_out(ctx, name, size, {"view": name, "fov_mm": list(ctx.viewer.view(name).fov)})


@handler(role="viewer_control")
def fit(ctx: RadiologyContext, view: ViewOrAll = "all", size: Size = DEFAULT_SIZE) -> HandlerOutput:
    """Fit the slice view(s) to the whole volume and return the updated view(s)."""
    names = views_for(ctx, view)
    for n in names:
        ctx.viewer.fit(n)
    return _views_out(ctx, view, size, {"views": list(names)})


@handler(role="viewer_control")
def set_slice_offset(
    ctx: RadiologyContext,
    view: View,
    offset: Annotated[
        float,
        Field(
            ge=-MAX_OFFSET_MM,
            le=MAX_OFFSET_MM,
            description="Slice position in mm along the view's RAS axis (axial S, "
            "sagittal R, coronal A); 0 is a valid offset.",
        ),
    ],
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Set an axial, sagittal or coronal slice position directly in millimetres and return the updated view."""
    name = canonical_view(view)
    ctx.viewer.set_slice_offset(name, offset)
    v = ctx.viewer.view(name)
    return _views_out(ctx, name, size, {"view": name, "axis": v.axis_label, "offset": round(v.offset, 6)})


@handler(role="viewer_control")
def get_slice_offset_range(ctx: RadiologyContext, view: View = "red") -> HandlerOutput:
    """Return the valid minimum and maximum slice offset (mm) of a view, its slice step and current offset."""
    name = canonical_view(view)
    lo, hi = ctx.viewer.slice_offset_range(name)
    v = ctx.viewer.view(name)
    return HandlerOutput(
        {
            "view": name,
            "axis": v.axis_label,
            "min": round(lo, 6),
            "max": round(hi, 6),
            "step": round(ctx.viewer.slice_step(name), 6),
            "current": round(v.offset, 6),
        }
    )


@handler(role="viewer_control")
def recover_standard_views(
    ctx: RadiologyContext, volume_id: VolumeId = None, volume_name: VolumeName = None, size: Size = DEFAULT_SIZE
) -> HandlerOutput:
    """Restore axial, sagittal and coronal views fitted around a volume's centre (default: the active volume)."""
    vid = volume_ref(ctx, volume_id, volume_name)
    ctx.viewer.recover_standard_views(vid)
    return _views_out(ctx, "all", size, {"active_volume": vid})


@handler(role="viewer_control")
def image_coords_to_ras(
    ctx: RadiologyContext,
    view: View = "red",
    point_1000: Point1000 = None,
    bbox_1000: BBox1000 = None,
    volume_id: VolumeId = None,
    volume_name: VolumeName = None,
) -> HandlerOutput:
    """Convert a 0–999 point (or box centre) on a view's last image to RAS millimetres and voxel IJK."""
    name = canonical_view(view)
    pt = screen_point(point_1000, bbox_1000)
    vid = volume_ref(ctx, volume_id, volume_name)
    ras = ctx.viewer.point_to_ras(name, pt)
    result = {**ras_report(ctx, vid, ras), "view": name, "point_1000": [pt[0], pt[1]]}
    guards.check_source_series(ctx, vid, result)
    return HandlerOutput(result)


@handler(role="viewer_control")
def get_viewer_state(
    ctx: RadiologyContext,
    include_volumes: Annotated[bool, Field(description="Include the scene inventory.")] = True,
    include_fusion: Annotated[bool, Field(description="Include foreground/background fusion.")] = True,
    include_slice_positions: Annotated[bool, Field(description="Include each view's offset and FOV.")] = True,
) -> HandlerOutput:
    """Return the active volume, slice offsets, fusion state, layout and window/level."""
    st = ctx.viewer.state()
    out: dict[str, Any] = {k: st[k] for k in ("active_volume", "active_volume_name", "layout", "display")}
    if include_fusion:
        out["fusion"] = {
            k: st[k]
            for k in (
                "background_volume",
                "foreground_volume",
                "foreground_volume_name",
                "foreground_opacity",
                "fusion_mode",
            )
        }
    if include_slice_positions:
        out["views"] = st["views"]
    if include_volumes:
        out["inventory"] = ctx.viewer.inventory()
    out["evidence"] = list(ctx.evidence)
    return HandlerOutput(out)


@handler(role="viewer_control")
def wl(
    ctx: RadiologyContext,
    view: ViewOrAll = None,
    window: Annotated[float | None, Field(gt=0, le=1e6, description="Window width.")] = None,
    level: Annotated[float | None, Field(ge=-1e6, le=1e6, description="Window centre (level).")] = None,
    auto: Annotated[bool, Field(description="Automatic window/level instead of window and level.")] = False,
    volume_id: VolumeId = None,
    volume_name: VolumeName = None,
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Set the window/level of a volume (default: the active one) and return the updated view(s)."""
    vid = volume_ref(ctx, volume_id, volume_name)
    if auto:
        if window is not None or level is not None:
            raise HandlerError("invalid_arguments", "give either auto=true or window and level, not both")
        ctx.viewer.set_auto_window_level(vid)
    else:
        if window is None or level is None:
            raise HandlerError("invalid_arguments", "give window and level (or auto=true)")
        ctx.viewer.set_window_level(vid, window, level)
    return _views_out(ctx, view, size, {"volume_id": vid, **ctx.viewer.display(vid).snapshot()})


@handler(role="viewer_control")
def window_preset(
    ctx: RadiologyContext,
    preset: Annotated[
        PresetName,
        Field(
            description="ct_lung, ct_mediastinal, ct_bone, ct_brain, "
            "mr_auto, mr_t2_flair or pet_auto."
        ),
    ],
    view: ViewOrAll = None,
    volume_id: VolumeId = None,
    volume_name: VolumeName = None,
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Apply a modality window preset (CT lung/mediastinal/bone/brain, MR auto, PET auto) and return the view(s)."""
    vid = volume_ref(ctx, volume_id, volume_name)
    ctx.viewer.apply_preset(vid, preset)
    return _views_out(ctx, view, size, {"volume_id": vid, **ctx.viewer.display(vid).snapshot()})


@handler(role="viewer_control")
def jump(ctx: RadiologyContext, ras: RAS, view: ViewOrAll = None, size: Size = DEFAULT_SIZE) -> HandlerOutput:
    """Centre all linked views on a RAS point (mm) and return the updated views."""
    ctx.viewer.jump(np.array(ras, dtype=float))
    offsets = {n: round(ctx.viewer.view(n).offset, 6) for n in ("red", "yellow", "green")}
    return _views_out(ctx, view, size, {"ras": ras, "offsets": offsets})


@handler(role="viewer_control")
def set_layout(
    ctx: RadiologyContext,
    layout: Annotated[
        LayoutName,
        Field(
            description="three_up, one_up_red, one_up_yellow or one_up_green "
            "(Slicer names such as FourUp and OneUpRedSlice are accepted)."
        ),
    ],
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Set a standard layout (three views or one view) and return the views it shows."""
    ctx.viewer.set_layout(layout)
    return _views_out(ctx, None, size, {"layout": ctx.viewer.state()["layout"]})


@handler(role="viewer_control")
def fusion(
    ctx: RadiologyContext,
    background_volume_ref: Annotated[str, Field(max_length=256, description="Background volume id or name.")],
    foreground_volume_ref: Annotated[
        str | None, Field(max_length=256, description="Foreground volume id or name; null removes the foreground.")
    ] = None,
    foreground_opacity: Annotated[float, Field(ge=0, le=1, description="Foreground opacity, 0–1.")] = 0.5,
    mode: Annotated[Literal[FUSION_MODES], Field(description="blend (alpha) or add.")] = "blend",  # type: ignore[valid-type]
    view: ViewOrAll = None,
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Set foreground/background fusion of loaded, prealigned volumes (e.g. CT + PET) and return the fused view(s)."""
    bg = ref_to_volume(ctx, background_volume_ref)
    fg = ref_to_volume(ctx, foreground_volume_ref) if foreground_volume_ref is not None else None
    ctx.viewer.set_fusion(bg, fg, foreground_opacity, mode)
    st = ctx.viewer.state()
    result = {k: st[k] for k in ("background_volume", "foreground_volume", "foreground_opacity", "fusion_mode")}
    guards.check_fusion(ctx, bg, fg, result)
    return _views_out(ctx, view, size, result)
