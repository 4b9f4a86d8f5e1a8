"""Perfect answers built from a case's hidden truth (test helper: the product never answers from hidden/)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy import ndimage

from copilot.cases.annotations import read_geojson
from copilot.engine.volume.image import Volume
from copilot.engine.volume.loading import load_volume


def deep_voxel(mask: Volume) -> tuple[int, int, int]:
    """(i, j, k) of the mask voxel farthest from the mask's border."""
    dist = ndimage.distance_transform_edt(mask.data > 0)
    k, j, i = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return int(i), int(j), int(k)


def evidence_block(slices: dict[str, float], ras: tuple[float, float, float]) -> str:
    return (
        f"EVIDENCE:\nKEY_SLICE_AXIAL_MM: {slices['S']:.3f}\nKEY_SLICE_SAGITTAL_MM: {slices['R']:.3f}\n"
        f"KEY_SLICE_CORONAL_MM: {slices['A']:.3f}\nRAS: [{ras[0]:.3f}, {ras[1]:.3f}, {ras[2]:.3f}]\n"
    )


def perfect_evidence(case: Path) -> tuple[dict[str, float], tuple[float, float, float]]:
    mask = load_volume(case / "hidden" / "mask.nii.gz")
    ras = mask.ijk_to_ras_point(np.array(deep_voxel(mask), dtype=float))
    return {"R": float(ras[0]), "A": float(ras[1]), "S": float(ras[2])}, (float(ras[0]), float(ras[1]), float(ras[2]))


def tumour_point(case: Path, cls: str) -> tuple[float, float]:
    """A point well inside the first polygon of a class (its vertex mean, nudged inside)."""
    for ann in read_geojson(case / "hidden" / "annotations.geojson"):
        if ann.cls == cls:
            c = ann.exterior.mean(axis=0)
            if ann.contains(*c):
                return float(c[0]), float(c[1])
    raise ValueError(f"no {cls} polygon")


def perfect_response(case: Path) -> str:
    meta = json.loads((case / "case.json").read_text())
    truth = json.loads((case / "hidden" / "truth.json").read_text())
    module = meta["module"]
    if module == "brain_mri":
        if truth["label"] == "C":
            return "No lesion seen.\nANSWER: C"
        slices, ras = perfect_evidence(case)
        return f"Rationale.\n{evidence_block(slices, ras)}ANSWER: {truth['label']}"
    if module == "longitudinal_mri":
        fields = "\n".join(f"{k}: {v or 'NO'}" for k, v in truth["fields"].items())
        return f"Comparison.\n{fields}\nANSWER: {truth['label']}"
    if module == "lung_petct":
        compact = "".join(f"{q}{truth['answers'][q]}" for q in "12345")
        slices, ras = perfect_evidence(case)
        return f"Rationale.\n{evidence_block(slices, ras)}{compact}"
    if module == "breast_wsi":
        locs = [] if truth["label"] == "N" else [dict(zip("xy", tumour_point(case, truth["label"]), strict=True))]
        opt = "ABCDEFG"[["N", "PB", "UDH", "FEA", "ADH", "DCIS", "IC"].index(truth["label"])]
        return json.dumps(
            {
                "selected_option": opt,
                "wsi_label": truth["label"],
                "confidence": 0.9,
                "brief_rationale": "r",
                "localizations": locs,
            }
        )
    positive = truth["tumor_presence"] == "tumor_present"
    locs = [dict(zip("xy", tumour_point(case, "Tumor"), strict=True))] if positive else []
    return json.dumps(
        {
            "tumor_presence": truth["tumor_presence"],
            "largest_metastasis": truth["largest_metastasis"],
            "confidence": 0.8,
            "brief_rationale": "r",
            "localizations": locs,
        }
    )
