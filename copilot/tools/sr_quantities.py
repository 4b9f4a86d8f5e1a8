"""Quantities as a report stores them: NUM content items (TID 300) with UCUM units and their derivation — a CT value
in Hounsfield units (`[hnsf'U]`), a PET value as SUVbw (`{SUVbw}g/ml`), a region's mean, SD, minimum and maximum
(SCT derivation codes) and its volume in ml — with MedCopilot named as the algorithm and the region as its
parameters. A value at a point is a planar ROI group with an SCOORD3D POINT, a sphere a volumetric ROI group with
an SCOORD3D ELLIPSOID, a box or a segment a measurement group (TID 1501).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydicom.sr.coding import Code

import copilot
from copilot.engine.volume.dicom_sources import SourceFrame

HU_NAME = Code("112031", "DCM", "Attenuation Coefficient")
HU_UNIT = Code("[hnsf'U]", "UCUM", "Hounsfield unit")
SUV_NAME = Code("126401", "DCM", "SUVbw")
SUV_UNIT = Code("{SUVbw}g/ml", "UCUM", "Standardized Uptake Value body weight")
VOLUME_NAME = Code("118565006", "SCT", "Volume")
ML = Code("ml", "UCUM", "milliliter")
DERIVATIONS = {
    "mean": Code("373098007", "SCT", "Mean"),
    "sd": Code("386136009", "SCT", "Standard Deviation"),
    "min": Code("255605001", "SCT", "Minimum"),
    "max": Code("56851009", "SCT", "Maximum"),
}


def ras_to_lps(ras: list[float]) -> list[float]:
    """RAS millimetres → DICOM patient coordinates (LPS)."""
    return [-float(ras[0]), -float(ras[1]), float(ras[2])]


def region_words(rec: dict[str, Any]) -> str:
    """The measured region in words (the algorithm's parameter): shape, centre and size."""
    shape = rec.get("shape")
    if shape == "point":
        return f"voxel nearest RAS {rec.get('ras')} mm"
    if shape == "sphere":
        return f"sphere of radius {rec.get('radius_mm')} mm at RAS {rec.get('center_ras')} mm"
    if shape == "box":
        return f"box {rec.get('size_mm')} mm (R, A, S) at RAS {rec.get('center_ras')} mm"
    return f"segment {rec.get('segment')}"


def statistics(rec: dict[str, Any]) -> list[tuple[Code, Code, str, float]]:
    """(name, unit, statistic, value) of each quantity a record holds in a unit DICOM codes: HU for CT, SUVbw for
    PET where its tags allowed it (raw values in other units are left to the record)."""
    values: dict[str, float] = dict(rec.get("values") or {})
    found: list[tuple[Code, Code, str, float]] = []
    if rec.get("units") == "HU":
        found += [(HU_NAME, HU_UNIT, k, float(v)) for k, v in values.items() if v is not None]
    suv = rec.get("suv") or {}
    if suv.get("available") and isinstance(suv.get("bw"), dict):
        found += [(SUV_NAME, SUV_UNIT, k, float(v)) for k, v in suv["bw"].items() if v is not None]
    return found


def measurements(rec: dict[str, Any]) -> tuple[list[Any], dict[str, float]]:
    """The record's NUM items and their values by name (`SUVbw max`, `Volume`…) for the report's digest."""
    import highdicom as hd

    algorithm = hd.sr.AlgorithmIdentification(
        name="MedCopilot record_measurement", version=copilot.__version__, parameters=[region_words(rec)]
    )
    items: list[Any] = []
    values: dict[str, float] = {}
    for name, unit, stat, value in statistics(rec):
        derivation = DERIVATIONS.get(stat)
        items.append(hd.sr.Measurement(name=name, value=value, unit=unit, derivation=derivation,
                                       algorithm_id=algorithm))  # fmt: skip
        values[f"{name.meaning} {stat}"] = round(value, 4)
    if rec.get("shape") != "point" and rec.get("volume_ml") is not None:
        items.append(hd.sr.Measurement(name=VOLUME_NAME, value=float(rec["volume_ml"]), unit=ML,
                                       algorithm_id=algorithm))  # fmt: skip
        values["Volume"] = round(float(rec["volume_ml"]), 4)
    return items, values


def quantity_group(rec: dict[str, Any], series: list[SourceFrame], tracking: Any) -> tuple[Any, dict[str, float]]:
    """The report group of one recorded measurement, and its values by name."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    items, values = measurements(rec)
    frame_of_reference = str(series[0].dataset.FrameOfReferenceUID)
    shape = rec.get("shape")
    group: Any
    if shape == "point":
        point = np.array([ras_to_lps(rec["ras"])], dtype=np.float64)
        region = hd.sr.ImageRegion3D("POINT", point, frame_of_reference)
        group = hd.sr.PlanarROIMeasurementsAndQualitativeEvaluations(
            tracking, referenced_region=region, finding_type=codes.DCM.Finding, measurements=items or None
        )
    elif shape == "sphere":
        c, r = np.array(rec["center_ras"], dtype=float), float(rec["radius_mm"])
        ends = [c + s * r * axis for axis in np.eye(3) for s in (-1.0, 1.0)]  # the three axes' end points
        surface = hd.sr.VolumeSurface(
            "ELLIPSOID", np.array([ras_to_lps(list(p)) for p in ends], dtype=np.float64), frame_of_reference,
            source_series=hd.sr.SourceSeriesForSegmentation(str(series[0].dataset.SeriesInstanceUID)),
        )  # fmt: skip
        group = hd.sr.VolumetricROIMeasurementsAndQualitativeEvaluations(
            tracking, referenced_volume_surface=surface, finding_type=codes.DCM.Finding, measurements=items or None
        )
    else:
        group = hd.sr.MeasurementsAndQualitativeEvaluations(
            tracking, finding_type=codes.DCM.Finding, measurements=items or None
        )
    return group, values
