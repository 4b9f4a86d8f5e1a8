"""`record_measurement`: a value at a point or a region's statistics recorded as evidence, so that a measurement
report stores it as numbers (HU, SUVbw, volume; `copilot.tools.sr_quantities`) rather than only as the answer's
words. The numbers are those `probe_value` and `region_stats` give for the same arguments.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from copilot.errors import HandlerError
from copilot.tools import measure
from copilot.tools.args import Label, VolumeId, VolumeName
from copilot.tools.radiology import handler
from copilot.tools.registry import HandlerOutput, RadiologyContext

Shape = Annotated[
    Literal["point", "sphere", "box", "segment"],
    Field(description="'point': the voxel nearest center_ras; else the region region_stats measures."),
]


@handler(role="evidence_capture")
def record_measurement(
    ctx: RadiologyContext,
    shape: Shape,
    center_ras: measure.CentreRas = None,
    radius_mm: measure.RadiusMm = None,
    size_mm: measure.SizeMm = None,
    segment: Annotated[str | None, Field(max_length=256, description="Segment id or name (shape 'segment').")] = None,
    volume_id: VolumeId = None,
    volume_name: VolumeName = None,
    label: Label = "",
) -> HandlerOutput:
    """Record a measurement as evidence: the value at a RAS point, or the mean, SD, min, max and volume of a
    sphere, box or segment (HU for CT, SUVbw too for PET where its tags allow); a report stores it as numbers."""
    if shape == "point":
        if center_ras is None:
            raise HandlerError("invalid_arguments", "shape 'point' needs center_ras")
        got = measure.probe_value(ctx, center_ras, volume_id, volume_name).result
        values: dict[str, Any] = {"value": got["value"]}
        where: dict[str, Any] = {"ras": [float(v) for v in center_ras], "ijk": got["ijk"]}
    else:
        got = measure.region_stats(ctx, shape, center_ras, radius_mm, size_mm, segment, volume_id, volume_name).result
        values = {k: got[k] for k in ("mean", "sd", "min", "max")}
        where = {"center_ras": center_ras, "radius_mm": radius_mm, "size_mm": size_mm, "segment": segment,
                 "voxels": got["voxels"], "volume_ml": got["volume_ml"]}  # fmt: skip
    record = {"evidence_id": len(ctx.evidence) + 1, "kind": "measurement", "label": label, "shape": shape,
              "volume_id": got["volume_id"], "volume": got["volume"], **where, "units": got["units"],
              "values": values}  # fmt: skip
    if got.get("suv") is not None:
        record["suv"] = got["suv"]
    ctx.evidence.append(record)
    return HandlerOutput({"evidence": record})
