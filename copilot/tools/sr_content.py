"""The measurement groups of a report (TID 1500) from the session's evidence: one group per finding, each with its
tracked lesion's identifier and UID (`copilot.tools.tracking`), its region as SCOORD3D in the patient coordinate
system (LPS) and its quantities as NUM items with UCUM units and their derivation.

A finding recorded twice (the same kind, volume and coordinates, whatever its label) is one group, so an answer
restating a recorded measurement does not store it again. `content_digest` names what a report holds apart from its
fresh UIDs, so identical content is recognised when it is stored a second time.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pydicom

from copilot.engine.volume.dicom_sources import SourceFrame
from copilot.tools.sr_quantities import quantity_group, ras_to_lps
from copilot.tools.sr_shapes import SHAPES, shape_groups
from copilot.tools.tracking import LesionBook

KINDS = ("key_slice", "point", "distance", "measurement", *SHAPES)
GENERIC_LABEL = re.compile(r"(?i)^\s*answer\b")  # labels the Store gives an answer's items: not a lesion's name


def finding_key(rec: dict[str, Any]) -> str:
    """What a finding is, apart from its label and evidence number: kind, volume, coordinates (0.01 mm) and, for a
    measurement, its region."""
    kind = rec.get("kind")

    def mm(p: Any) -> list[float]:
        return [round(float(v), 2) for v in p]

    if kind == "point":
        where: Any = mm(rec["ras"])
    elif kind == "distance":
        where = [mm(rec["a"]["ras"]), mm(rec["b"]["ras"])]
    elif kind == "key_slice":
        where = [rec.get("view"), round(float(rec.get("offset_mm") or 0.0), 2)]
    elif kind == "measurement":
        where = {k: rec.get(k) for k in ("shape", "ras", "center_ras", "radius_mm", "size_mm", "segment")}
    else:  # a shape: everything it records but its number and label
        where = {k: v for k, v in rec.items() if k not in ("evidence_id", "label")}
    vid = rec.get("volume_id") or (rec.get("a") or {}).get("volume_id")
    return json.dumps([kind, vid, where], sort_keys=True, default=str)


@dataclass
class Content:
    """A report's groups, the source instances they reference, counts per kind, the groups' labels and what the
    content is in words (for its digest)."""

    groups: list[Any] = field(default_factory=list)
    sources: list[pydicom.Dataset] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    described: list[Any] = field(default_factory=list)
    tracked: list[dict[str, str]] = field(default_factory=list)


def content_digest(content: Content, *texts: str) -> str:
    """SHA-256 of what a report says (its findings, labels, values and texts), never of its UIDs."""
    body = json.dumps([content.described, [t.strip() for t in texts]], sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def build_content(
    evidence: list[dict[str, Any]], series_of: Any, book: LesionBook | None, wanted: set[int] | None = None
) -> Content:
    """The groups of the evidence records (those numbered in `wanted`, else all) on DICOM series; `series_of(vid)`
    gives a volume's source frames or None; `book` gives tracked lesions their UIDs (None: fresh UIDs)."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    out = Content(counts={"key_slices": 0, "points": 0, "distances": 0, "measurements": 0, "left_out": 0,
                          "repeated": 0})  # fmt: skip
    used: dict[str, pydicom.Dataset] = {}
    seen: set[str] = set()

    def tracking(rec: dict[str, Any], what: str) -> Any:
        label = str(rec.get("label") or "").strip()
        shared = bool(label) and not GENERIC_LABEL.match(label)
        name = (label if shared else f"{what} {rec['evidence_id']}" + (f": {label}" if label else ""))[:64]
        if book is None:
            identifier, uid, origin = name, str(hd.UID()), "new"
        else:
            identifier, uid, origin = book.track(name, shared)
        out.labels.append(identifier)
        out.tracked.append({"identifier": identifier, "uid": uid, "from": origin})
        return hd.sr.TrackingIdentifier(uid=uid, identifier=identifier)

    def region(points: list[list[float]], series: list[SourceFrame], kind: str) -> Any:
        lps = np.array([ras_to_lps(p) for p in points], dtype=np.float64)
        return hd.sr.ImageRegion3D(kind, lps, str(series[0].dataset.FrameOfReferenceUID))

    for rec in evidence:
        kind = rec.get("kind")
        if wanted is not None and int(rec.get("evidence_id") or 0) not in wanted:
            continue
        vid = rec.get("volume_id") or (rec.get("a") or {}).get("volume_id")
        series = series_of(str(vid)) if vid else None
        if series is None or kind not in KINDS:
            out.counts["left_out"] += 1
            continue
        key = finding_key(rec)
        if key in seen:  # the same finding again (an answer restating a measurement): one group
            out.counts["repeated"] += 1
            continue
        seen.add(key)
        for source in series:
            used[str(source.dataset.SOPInstanceUID)] = source.dataset
        described: dict[str, Any] = {"finding": json.loads(key), "label": rec.get("label") or ""}
        if kind == "key_slice":
            k = int(np.clip(np.rint(rec["ijk_at_view_centre"][2]), 0, len(series) - 1))
            frame = [series[k].frame] if series[k].frame else None  # a multi-frame source: the slice's frame
            out.groups.append(
                hd.sr.MeasurementsAndQualitativeEvaluations(
                    tracking(rec, "key slice"),
                    finding_type=codes.DCM.Finding,
                    source_images=[hd.sr.SourceImageForMeasurementGroup.from_source_image(series[k].dataset, frame)],
                )
            )
            out.counts["key_slices"] += 1
        elif kind == "point":
            out.groups.append(
                hd.sr.PlanarROIMeasurementsAndQualitativeEvaluations(
                    tracking(rec, "point"), referenced_region=region([rec["ras"]], series, "POINT"),
                    finding_type=codes.DCM.Finding,
                )
            )  # fmt: skip
            out.counts["points"] += 1
        elif kind == "distance":
            described["mm"] = round(float(rec["distance_mm"]), 4)
            length = hd.sr.Measurement(
                name=codes.SCT.Length, value=float(rec["distance_mm"]), unit=codes.UCUM.Millimeter
            )
            out.groups.append(
                hd.sr.PlanarROIMeasurementsAndQualitativeEvaluations(
                    tracking(rec, "distance"),
                    referenced_region=region([rec["a"]["ras"], rec["b"]["ras"]], series, "POLYLINE"),
                    finding_type=codes.DCM.Finding, measurements=[length],
                )
            )  # fmt: skip
            out.counts["distances"] += 1
        elif kind == "measurement":
            group, values = quantity_group(rec, series, tracking(rec, "measurement"))
            described["values"] = values
            out.groups.append(group)
            out.counts["measurements"] += 1
        else:
            tracking(rec, str(kind))
            tracked = (out.tracked[-1]["identifier"], out.tracked[-1]["uid"])
            groups, described["values"] = shape_groups(rec, str(series[0].dataset.FrameOfReferenceUID), tracked)
            out.groups += groups
            out.counts["measurements"] += 1
        out.described.append(described)
    out.sources = list(used.values())
    return out
