"""NSCLC-like PET/CT case packs: a thorax phantom with lobes, mediastinum and spine; PET with physiological
uptake, a hot primary tumour and nodes.

The answers are consistent with the images: the primary sits in the lobe of Q1, its longest diameter
follows the T stage of Q2 (T1 ≤ 3 cm, T2 3–5, T3 5–7, T4 > 7 cm), hilar (N1) or mediastinal (N2)
nodes are enlarged and PET-avid per Q3, and histology/grade (Q4/Q5, not decidable from images) come
from a fixed distribution close to the NSCLC Radiogenomics cohort's (mostly adenocarcinoma, mostly
G2/G3). Series: a diagnostic CT (the evidence source series, on which the hidden mask lies), the
low-dose CT of the PET/CT and the PET, each on its own grid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk
from scipy import ndimage

from copilot.cases.pack import write_pack

LOBES = {"A": "RUL", "B": "RML", "C": "RLL", "D": "LUL", "E": "LLL", "F": "LINGULA"}
T_DIAMETER_CM = {"A": (1.5, 2.8), "B": (3.3, 4.6), "C": (5.3, 6.5), "D": (7.3, 8.0)}
HISTOLOGY = (("A", 0.6), ("B", 0.3), ("D", 0.1))  # adenocarcinoma, squamous, other NSCLC
GRADE = (("A", 0.15), ("B", 0.45), ("C", 0.35), ("D", 0.05))
SOURCE_SERIES = "CT_diagnostic"


def _pick(rng: np.random.Generator, table: tuple[tuple[str, float], ...]) -> str:
    letters, weights = zip(*table, strict=True)
    return str(rng.choice(letters, p=np.array(weights) / sum(weights)))


def _grid(spacing: float, extent=(440.0, 320.0, 300.0)) -> tuple[sitk.Image, np.ndarray]:
    """An axial LPS grid centred on the carina; returns the image and RAS coordinates [3, k, j, i]."""
    size = [round(e / spacing) for e in extent]
    ref = sitk.Image(size, sitk.sitkFloat32)
    ref.SetSpacing((spacing,) * 3)
    ref.SetOrigin((-extent[0] / 2, -extent[1] / 2 - 10.0, -extent[2] / 2))  # LPS
    k, j, i = np.meshgrid(*(np.arange(n, dtype=np.float32) for n in size[::-1]), indexing="ij")
    origin = np.array(ref.GetOrigin())
    lps = [origin[a] + (i, j, k)[a] * spacing for a in range(3)]
    return ref, np.stack([-lps[0], -lps[1], lps[2]])


def _ellipsoid(ras: np.ndarray, centre, semi) -> np.ndarray:
    return sum(((ras[a] - centre[a]) / semi[a]) ** 2 for a in range(3)) <= 1.0


def anatomy(ras: np.ndarray) -> dict[str, np.ndarray]:
    """Boolean masks of the phantom's structures (RAS mm)."""
    r, a, s = ras
    body = ((r / 170.0) ** 2 + ((a + 10.0) / 120.0) ** 2 <= 1.0) & (np.abs(s) <= 140)
    fat = body & ~((r / 155.0) ** 2 + ((a + 10.0) / 105.0) ** 2 <= 1.0)
    heart = _ellipsoid(ras, (-15, 25, -45), (62, 55, 50))
    right = _ellipsoid(ras, (78, -12, 5), (62, 82, 125)) & ~heart
    left = _ellipsoid(ras, (-80, -12, 5), (58, 82, 120)) & ~heart
    oblique = s < -20.0 - a  # below/behind the oblique fissure: lower lobes
    lobes = {
        "RLL": right & oblique,
        "RML": right & ~oblique & (s < 10.0) & (a > -25.0),
        "LLL": left & oblique,
        "LINGULA": left & ~oblique & (s < 0.0) & (a > -10.0),
    }
    lobes["RUL"] = right & ~oblique & ~lobes["RML"]
    lobes["LUL"] = left & ~oblique & ~lobes["LINGULA"]
    spine = ((r / 18.0) ** 2 + ((a + 95.0) / 18.0) ** 2 <= 1.0) & body
    trachea = (r**2 + (a + 5.0) ** 2 <= 9.0**2) & (s > 0) & (s < 120)
    aorta = ((r + 22.0) ** 2 + (a + 50.0) ** 2 <= 13.0**2) & (s < 40)
    liver = _ellipsoid(ras, (60, 0, -150), (110, 95, 60)) & body
    return {
        "body": body,
        "fat": fat,
        "heart": heart,
        "lung_r": right,
        "lung_l": left,
        "spine": spine,
        "trachea": trachea,
        "aorta": aorta,
        "liver": liver,
        **lobes,
    }


def _tumour(ras: np.ndarray, centre: np.ndarray, diameter_mm: float, rng: np.random.Generator) -> np.ndarray:
    radius = diameter_mm / 2.0
    d = np.sqrt(sum((ras[a] - centre[a]) ** 2 for a in range(3)))
    near = d < radius * 1.6
    spic = np.zeros_like(d)
    spic[near] = ndimage.gaussian_filter(rng.standard_normal(d.shape).astype(np.float32), 1.0)[near]
    return d < radius * (1.0 + 0.12 * spic)


def _inside_point(mask: np.ndarray, ras: np.ndarray, margin_vox: int, rng: np.random.Generator) -> np.ndarray:
    core = ndimage.binary_erosion(mask, iterations=max(1, margin_vox))
    cand = np.argwhere(core if core.any() else mask)
    k, j, i = cand[rng.integers(len(cand))]
    return ras[:, k, j, i]


def make_lung_case(out_dir: Path, case_id: str, seed: int, spacing: float = 2.5) -> Path:
    rng = np.random.default_rng(seed)
    loc = "ABCDEF"[seed % 6]
    t_stage = "ABCD"[(seed // 6) % 4]
    n_stage = "ABC"[(seed // 2) % 3]
    hist, grade = _pick(rng, HISTOLOGY), _pick(rng, GRADE)
    ref, ras = _grid(spacing)
    anat = anatomy(ras)
    diameter = float(rng.uniform(*T_DIAMETER_CM[t_stage])) * 10.0
    lobe = anat[LOBES[loc]]
    margin = int(min(diameter / 2.0, 25.0) / spacing)
    centre = _inside_point(lobe, ras, margin, rng)
    lung = anat["lung_r"] | anat["lung_l"]
    tumour = _tumour(ras, centre, diameter, rng) & (lung | ndimage.binary_dilation(lung, iterations=2))
    nodes = np.zeros_like(tumour)
    right_side = loc in "ABC"
    if n_stage == "B":  # ipsilateral hilar node
        hilum = np.array([35.0 if right_side else -38.0, -5.0, 0.0])
        nodes |= np.sqrt(sum((ras[a] - hilum[a]) ** 2 for a in range(3))) < 8.0
    if n_stage == "C":  # subcarinal and right paratracheal nodes
        for c in ((0.0, -15.0, -18.0), (14.0, -2.0, 30.0)):
            nodes |= np.sqrt(sum((ras[a] - c[a]) ** 2 for a in range(3))) < 8.5
    ct = np.full(ras.shape[1:], -1000.0, dtype=np.float32)
    ct[anat["body"]] = 40.0
    ct[anat["fat"]] = -100.0
    ct[anat["liver"]] = 60.0
    ct[lung] = -850.0 + 40.0 * ndimage.gaussian_filter(rng.standard_normal(ct.shape).astype(np.float32), 1.0)[lung]
    ct[anat["heart"] & anat["body"]] = 45.0
    ct[anat["aorta"]] = 50.0
    ct[anat["trachea"]] = -990.0
    ct[anat["spine"]] = 650.0
    ct[nodes] = 45.0
    ct[tumour] = 35.0 + 15.0 * rng.standard_normal(int(tumour.sum())).astype(np.float32)
    ct += rng.normal(0, 12.0, ct.shape).astype(np.float32) * anat["body"]
    suv = np.zeros_like(ct)
    suv[anat["body"]] = 0.7
    suv[lung] = 0.35
    suv[anat["heart"] & anat["body"]] = 4.5
    suv[anat["aorta"]] = 1.8
    suv[anat["liver"]] = 2.3
    suv[anat["spine"]] = 1.4
    suv[nodes] = float(rng.uniform(3.5, 6.0))
    suv[tumour] = float(rng.uniform(6.0, 16.0))
    case = out_dir / case_id
    (case / "images").mkdir(parents=True, exist_ok=True)
    (case / "hidden").mkdir(exist_ok=True)
    diag = _image(ct, ref)
    sitk.WriteImage(sitk.Cast(diag, sitk.sitkInt16), str(case / "images" / f"{SOURCE_SERIES}.nii.gz"), True)
    pet_grid = _coarser(ref, 4.0)
    pet = sitk.Resample(
        sitk.SmoothingRecursiveGaussian(_image(suv, ref), 2.5), pet_grid, sitk.Transform(), sitk.sitkLinear, 0.0
    )
    sitk.WriteImage(pet, str(case / "images" / "PET_AC.nii.gz"), True)
    lowdose = sitk.Resample(diag, pet_grid, sitk.Transform(), sitk.sitkLinear, -1000.0)
    sitk.WriteImage(sitk.Cast(lowdose, sitk.sitkInt16), str(case / "images" / "CT_lowdose.nii.gz"), True)
    mask = _image(tumour.astype(np.float32), ref)
    sitk.WriteImage(sitk.Cast(mask, sitk.sitkUInt8), str(case / "hidden" / "mask.nii.gz"), True)
    files = [f"images/{SOURCE_SERIES}.nii.gz", "images/CT_lowdose.nii.gz", "images/PET_AC.nii.gz"]
    meta: dict[str, Any] = {
        "case_id": case_id,
        "module": "lung_petct",
        "inputs": {"volumes": files, "default_volume": SOURCE_SERIES},
        "prompt": {
            "template": "lung_petct",
            "default_alias": "diagnostic_ct",
            "source_series": SOURCE_SERIES,
            "source_modality": "CT",
            "evidence": True,
            "series": {"diagnostic_ct": SOURCE_SERIES, "petct_ct": "CT_lowdose", "pet": "PET_AC"},
        },
    }
    truth = {
        "answers": {"1": loc, "2": t_stage, "3": n_stage, "4": hist, "5": grade},
        "source_series": SOURCE_SERIES,
        "lobe": LOBES[loc],
        "diameter_mm": round(diameter, 1),
        "tumour_centre_ras": [round(float(v), 2) for v in centre],
        "seed": seed,
    }
    return write_pack(case, meta["module"], meta["inputs"], meta["prompt"], truth)


def _image(arr: np.ndarray, ref: sitk.Image) -> sitk.Image:
    img = sitk.GetImageFromArray(arr)
    img.CopyInformation(ref)
    return img


def _coarser(ref: sitk.Image, spacing: float) -> sitk.Image:
    size = [round(n * s / spacing) for n, s in zip(ref.GetSize(), ref.GetSpacing(), strict=True)]
    grid = sitk.Image(size, sitk.sitkFloat32)
    grid.SetSpacing((spacing,) * 3)
    grid.SetOrigin(ref.GetOrigin())
    grid.SetDirection(ref.GetDirection())
    return grid
