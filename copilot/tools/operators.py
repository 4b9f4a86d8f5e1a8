"""Track B analysis operators: registration, resampling, segmentation and statistics.

Every operator resolves its inputs strictly (an unknown or stale id/name is an error, never the active
volume by default), creates new named nodes (never overwrites a source), records its provenance, and
returns the evidence to verify it (fused view and checkerboard for registration, outlines for segments).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from copilot.engine.ops import registration as reg
from copilot.engine.ops import segmentation as seg
from copilot.engine.volume.derived import Segment, TransformNode
from copilot.engine.volume.image import Volume, sitk_reason
from copilot.engine.volume.render import RENDERER, Layer, compose
from copilot.errors import HandlerError
from copilot.tools import guards
from copilot.tools.args import DEFAULT_SIZE, Mm, Size, ref_to_volume, render_views
from copilot.tools.radiology import handler
from copilot.tools.registry import HandlerOutput, ImageOut, RadiologyContext

Ref = Annotated[str, Field(min_length=1, max_length=256, description="Volume node id or exact name.")]
NewName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.\- ]+$",
        description="Name of the node to create (must not exist).",
    ),
]
Intensity = Annotated[float, Field(ge=-1e6, le=1e6)]
Seeds = Annotated[
    list[Annotated[list[Mm], Field(min_length=3, max_length=3)]],
    Field(min_length=1, max_length=50, description="Seed points as [R, A, S] in mm."),
]
OPERATOR: dict[str, Any] = {"role": "analysis_operator", "tracks": ("B",)}


def _strict_volume(ctx: RadiologyContext, ref: str) -> str:
    return ref_to_volume(ctx, ref)


def _new_volume_name(ctx: RadiologyContext, name: str) -> None:
    if ctx.viewer.volume_name_taken(name):
        raise HandlerError("name_taken", f"a volume named {name!r} exists already; operators never overwrite")


@handler(**OPERATOR)
def register_volumes(
    ctx: RadiologyContext,
    fixed_volume: Ref,
    moving_volume: Ref,
    output_transform: NewName,
    transform_type: Annotated[
        Literal["rigid", "affine"], Field(description="rigid (6 dof) or affine (12 dof).")
    ] = "rigid",
    sampling_percentage: Annotated[
        float, Field(gt=0, le=1, description="Fraction of voxels sampled by the metric (BRAINSFit samplingPercentage).")
    ] = 0.02,
    histogram_bins: Annotated[int, Field(ge=8, le=256, description="Mattes MI histogram bins.")] = 50,
    max_iterations: Annotated[int, Field(ge=1, le=2000, description="Optimizer iterations per level.")] = 200,
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Register a moving volume to a fixed one (Mattes MI, multi-resolution); returns a transform node, its final
    metric, and a fused view and a checkerboard of fixed vs registered moving to verify alignment."""
    fid, mid = _strict_volume(ctx, fixed_volume), _strict_volume(ctx, moving_volume)
    if fid == mid:
        raise HandlerError("invalid_arguments", "fixed and moving volumes must differ")
    viewer = ctx.viewer
    fixed, moving = viewer.volume(fid), viewer.volume(mid)

    def observe(level: int, iteration: int, metric: float) -> bool:
        ctx.report(
            (level + min(iteration, max_iterations) / max_iterations) / 3.0,
            f"level {level + 1}/3, iteration {iteration}, metric {metric:.4f}",
        )
        return ctx.is_cancelled()

    ctx.report(0.0, "registering")
    try:
        result = reg.register(
            fixed, moving, transform_type, sampling_percentage, histogram_bins, max_iterations, observer=observe
        )
    except RuntimeError as exc:  # ITK's own refusal (e.g. a sampling so sparse that no voxel is drawn)
        raise HandlerError("registration_failed", f"the registration could not run: {sitk_reason(exc)}") from None
    ctx.check_cancelled()
    node = TransformNode(
        output_transform,
        fid,
        mid,
        result.matrix_ras,
        transform_type,
        result.parameters,
        result.metric,
        {
            "operator": "register_volumes",
            "fixed": fixed.name,
            "moving": moving.name,
            "sampling_percentage": sampling_percentage,
            "histogram_bins": histogram_bins,
            "iterations": result.iterations,
            "seconds": round(result.seconds, 3),
        },
    )
    tid = viewer.add_transform(node)
    registered = reg.resample(moving, fixed, result.matrix_ras, f"{moving.name} registered")
    images = _verification_views(ctx, fid, registered, size)
    return HandlerOutput(
        {
            "transform_id": tid,
            **node.snapshot(),
            "parameters": result.parameters,
            "iterations": result.iterations,
            "stop_condition": result.stop_condition,
        },
        images,
    )


def _verification_views(ctx: RadiologyContext, fid: str, registered: Volume, size: int) -> list[ImageOut]:
    """Fused (50 %) and checkerboard renders of fixed vs registered in the axial view."""
    viewer = ctx.viewer
    view = viewer.view("red")
    fixed_layer = Layer(viewer.volume(fid), viewer.display(fid))
    from copilot.engine.volume.display import default_display

    moving_layer = Layer(registered, default_display(registered))
    renderer = getattr(viewer, "renderer", RENDERER)
    fused = compose(view, (size, size), fixed_layer, moving_layer, 0.5, renderer=renderer)
    a = np.asarray(compose(view, (size, size), fixed_layer, renderer=renderer).convert("RGB"))
    b = np.asarray(compose(view, (size, size), moving_layer, renderer=renderer).convert("RGB"))
    from PIL import Image

    board = Image.fromarray(reg.checkerboard(a, b))
    return [
        ImageOut(view="red", image=fused, label="fused fixed/registered"),
        ImageOut(view="red", image=board, label="checkerboard fixed/registered"),
    ]


@handler(**OPERATOR)
def apply_transform(
    ctx: RadiologyContext,
    volume: Ref,
    transform: Annotated[str, Field(min_length=1, max_length=256, description="Transform node id or name.")],
    output_volume: NewName,
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Resample a volume through a registration transform onto the transform's fixed grid, as a new volume."""
    vid = _strict_volume(ctx, volume)
    tid, node = ctx.viewer.transform(transform)
    if vid != node.moving:
        raise HandlerError(
            "wrong_layer",
            f"{transform!r} maps {ctx.viewer.volume(node.moving).name} onto "
            f"{ctx.viewer.volume(node.fixed).name}; it cannot be applied to {ctx.viewer.volume(vid).name}",
        )
    _new_volume_name(ctx, output_volume)
    out = reg.resample(ctx.viewer.volume(vid), ctx.viewer.volume(node.fixed), node.matrix, output_volume)
    guards.mark_derived(ctx, out, node.fixed, supersedes=vid)
    new = ctx.viewer.add_volume(out)
    return HandlerOutput(
        {
            "volume_id": new,
            "name": output_volume,
            "provenance": {"operator": "apply_transform", "source": vid, "transform": tid, "reference": node.fixed},
        }
    )


@handler(**OPERATOR)
def resample_volume(
    ctx: RadiologyContext,
    volume: Ref,
    reference_volume: Ref,
    output_volume: NewName,
    interpolation: Annotated[Literal["linear", "nearest"], Field(description="Interpolator.")] = "linear",
) -> HandlerOutput:
    """Resample a volume onto another volume's grid (identity transform, world coordinates), as a new volume."""
    vid, rid = _strict_volume(ctx, volume), _strict_volume(ctx, reference_volume)
    _new_volume_name(ctx, output_volume)
    out = reg.resample(
        ctx.viewer.volume(vid), ctx.viewer.volume(rid), np.eye(4), output_volume, nearest=interpolation == "nearest"
    )
    guards.mark_derived(ctx, out, vid)  # an identity resample keeps the source's frame of reference
    new = ctx.viewer.add_volume(out)
    return HandlerOutput(
        {
            "volume_id": new,
            "name": output_volume,
            "provenance": {"operator": "resample_volume", "source": vid, "reference": rid},
        }
    )


def _add_segment(
    ctx: RadiologyContext, vid: str, mask: np.ndarray, name: str, provenance: dict[str, Any], size: int
) -> HandlerOutput:
    if not mask.any():
        raise HandlerError("empty_segment", "the operation selected no voxel; nothing was created")
    source = ctx.viewer.volume(vid)
    sid = ctx.viewer.add_segment(Segment(name, seg.mask_volume(source, mask, name), vid, provenance))
    stats = seg.statistics(ctx.viewer.segment(sid)[1].mask, {})
    return HandlerOutput(
        {
            "segment_id": sid,
            "name": name,
            "source": vid,
            "provenance": provenance,
            "voxels": stats["voxels"],
            "volume_mm3": stats["volume_mm3"],
            "centroid_ras": stats["centroid_ras"],
        },
        render_views(ctx, ("red", "yellow", "green"), size),
    )


@handler(**OPERATOR)
def segment_threshold(
    ctx: RadiologyContext,
    volume: Ref,
    output_segment: NewName,
    lower: Annotated[float, Field(ge=-1e6, le=1e6, description="Lowest value included.")],
    upper: Annotated[float, Field(ge=-1e6, le=1e6, description="Highest value included.")],
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Segment the voxels of a volume within [lower, upper]; returns the named segment, shown as outlines."""
    if upper < lower:
        raise HandlerError("invalid_arguments", "upper must be ≥ lower")
    vid = _strict_volume(ctx, volume)
    mask = seg.threshold(ctx.viewer.volume(vid), lower, upper)
    return _add_segment(
        ctx, vid, mask, output_segment, {"operator": "segment_threshold", "lower": lower, "upper": upper}, size
    )


@handler(**OPERATOR)
def segment_grow_from_seeds(
    ctx: RadiologyContext,
    volume: Ref,
    output_segment: NewName,
    seeds_ras: Seeds,
    method: Annotated[
        Literal["confidence", "connected"],
        Field(description="confidence: mean ± multiplier·sd around the seeds; connected: within [lower, upper]."),
    ] = "confidence",
    lower: Annotated[Intensity | None, Field(description="connected: lowest value.")] = None,
    upper: Annotated[Intensity | None, Field(description="connected: highest value.")] = None,
    multiplier: Annotated[float, Field(gt=0, le=10, description="confidence: interval width in sd.")] = 2.5,
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Grow a segment from RAS seed points (SimpleITK connected / confidence connected)."""
    vid = _strict_volume(ctx, volume)
    ctx.report(0.1, "growing")
    try:
        mask = seg.grow(ctx.viewer.volume(vid), seeds_ras, method, lower, upper, multiplier)
    except ValueError as exc:
        raise HandlerError("invalid_arguments", str(exc)) from exc
    return _add_segment(
        ctx,
        vid,
        mask,
        output_segment,
        {"operator": "segment_grow_from_seeds", "method": method, "seeds_ras": seeds_ras, "multiplier": multiplier},
        size,
    )


@handler(**OPERATOR, hints={"readOnlyHint": True, "idempotentHint": True})  # measures only
def segment_statistics(
    ctx: RadiologyContext,
    segment: Annotated[str, Field(min_length=1, max_length=256, description="Segment node id or name.")],
    volumes: Annotated[
        list[Annotated[str, Field(max_length=256)]] | None,
        Field(
            max_length=16,
            description="Volumes to measure inside the segment (ids or names); omitted: its source volume.",
        ),
    ] = None,
) -> HandlerOutput:
    """Volume (mm³), centroid (RAS), extent per RAS axis and max/mean intensity per volume of a segment."""
    sid, sg = ctx.viewer.segment(segment)
    refs = volumes or [sg.source]
    vols = {ctx.viewer.volume(v).name: ctx.viewer.volume(v) for v in (_strict_volume(ctx, r) for r in refs)}
    return HandlerOutput({"segment_id": sid, "name": sg.name, **seg.statistics(sg.mask, vols)})


@handler(**OPERATOR)
def vista3d_segment(
    ctx: RadiologyContext,
    volume: Ref,
    output_segment: NewName,
    class_prompts: Annotated[
        list[Annotated[str, Field(max_length=128)] | Annotated[int, Field(ge=0, le=100_000)]] | None,
        Field(max_length=16, description="Classes to segment, as label ids or names of the bundle's label dictionary."),
    ] = None,
    points_ras: Annotated[
        list[Annotated[list[Mm], Field(min_length=3, max_length=3)]] | None,
        Field(max_length=20, description="Point prompts as [R, A, S] in mm."),
    ] = None,
    point_labels: Annotated[
        list[Annotated[int, Field(ge=-1000, le=1000)]] | None,
        Field(max_length=20, description="One label per point: 1 foreground, 0 background."),
    ] = None,
    size: Size = DEFAULT_SIZE,
) -> HandlerOutput:
    """Segment with MONAI VISTA3D (CT) from class or point prompts, using the bundle configured in settings."""
    from copilot.engine.ops import vista3d

    root = vista3d.configured_bundle()
    if root is None:
        raise HandlerError(
            "not_configured",
            "no VISTA3D bundle is configured: set MEDCOPILOT_VISTA3D_BUNDLE to a "
            "local bundle folder (configs/inference.json, models/model.pt)",
        )
    vid = _strict_volume(ctx, volume)
    try:
        vista3d.check_prompts(class_prompts, points_ras, point_labels)
        bundle = vista3d.Vista3DBundle.load(root)
        if class_prompts is not None:
            bundle.class_ids(class_prompts)
        ctx.report(0.1, "VISTA3D inference")
        ctx.check_cancelled()
        mask = vista3d.segment(bundle, ctx.viewer.volume(vid), class_prompts, points_ras, point_labels)
        ctx.check_cancelled()
    except vista3d.Vista3DError as exc:
        raise HandlerError("invalid_prompt", str(exc)) from exc
    except ImportError as exc:
        raise HandlerError("not_configured", f"VISTA3D needs torch and monai ({exc})") from exc
    provenance = {
        "operator": "vista3d_segment",
        "bundle": str(root),
        "class_prompts": class_prompts,
        "points_ras": points_ras,
        "point_labels": point_labels,
        "device": bundle.device,
    }
    return _add_segment(ctx, vid, mask, output_segment, provenance, size)
