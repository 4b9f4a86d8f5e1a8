"""Report groups (TID 1410) of the clinician's measurement shapes, in the forms viewers read: a bidirectional
measurement as its long axis (an SCOORD3D POLYLINE holding the Long axis and Short axis lengths) and its short axis
(a POLYLINE of its own, the same Tracking UID), an ellipse as an SCOORD3D ELLIPSE (its axes' four end points) with
its area and statistics, an angle as a three-point POLYLINE with the angle in degrees.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydicom.sr.coding import Code

from copilot.tools.sr_quantities import measurements, ras_to_lps

AREA = (Code("42798000", "SCT", "Area"), Code("mm2", "UCUM", "square millimeter"))
ANGLE = (Code("1483009", "SCT", "Angle"), Code("deg", "UCUM", "degree"))
SHAPES = ("bidirectional", "ellipse", "angle")


def shape_groups(rec: dict[str, Any], frame_of_reference: str, tracked: tuple[str, str]) -> tuple[list[Any], Any]:
    """The groups of one shape record (all with its Tracking Identifier and UID `tracked`) and its numbers."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    def region(kind: str, points: list[list[float]]) -> Any:
        return hd.sr.ImageRegion3D(kind, np.array([ras_to_lps(p) for p in points], dtype=np.float64),
                                   frame_of_reference)  # fmt: skip

    def group(kind: str, points: list[list[float]], items: list[Any]) -> Any:
        return hd.sr.PlanarROIMeasurementsAndQualitativeEvaluations(
            hd.sr.TrackingIdentifier(identifier=tracked[0], uid=tracked[1]), referenced_region=region(kind, points),
            finding_type=codes.DCM.Finding, measurements=items)  # fmt: skip

    mm = codes.UCUM.Millimeter
    if rec["kind"] == "bidirectional":
        long_axis = hd.sr.Measurement(name=codes.SCT.LongAxis, value=float(rec["long_mm"]), unit=mm)
        short_axis = hd.sr.Measurement(name=codes.SCT.ShortAxis, value=float(rec["short_mm"]), unit=mm)
        ends = [[rec[axis]["a"]["ras"], rec[axis]["b"]["ras"]] for axis in ("long", "short")]
        return [group("POLYLINE", ends[0], [long_axis, short_axis]), group("POLYLINE", ends[1], [short_axis])], {
            "long": round(float(rec["long_mm"]), 4), "short": round(float(rec["short_mm"]), 4)}
    if rec["kind"] == "angle":
        angle = hd.sr.Measurement(name=ANGLE[0], value=float(rec["angle_deg"]), unit=ANGLE[1])
        return [group("POLYLINE", [p["ras"] for p in rec["points"]], [angle])], round(float(rec["angle_deg"]), 4)
    items, values = measurements(rec)
    items.append(hd.sr.Measurement(name=AREA[0], value=float(rec["area_mm2"]), unit=AREA[1]))
    return [group("ELLIPSE", rec["axes_ras"], items)], {**values, "Area": rec["area_mm2"]}
