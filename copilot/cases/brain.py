"""Synthetic brain-MRI case packs on real anatomy: the MNI ICBM152 2009a templates that nilearn ships.

T1 comes from the template; T2, FLAIR and T1c are synthesised from the grey/white-matter maps
(CSF is what the brain hull holds beyond them) with textbook contrasts. One of six lesion
phenotypes (or none) is placed deterministically per seed;
its labels (BraTS convention 1 core, 2 oedema, 4 enhancing) are the hidden mask. Lesion phenotypes are in
`brain_lesions.py`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk
from scipy import ndimage

from copilot.cases.anatomy import Anatomy
from copilot.cases.answers import BRAIN_OPTIONS
from copilot.cases.brain_lesions import CONTRAST, Compartment, choose_lesion, compartments, index_to_ras, label_map
from copilot.cases.pack import write_pack

TEMPLATE_FILES = {
    "t1": "mni_icbm152_t1_tal_nlin_sym_09a_converted.nii.gz",
    "gm": "mni_icbm152_gm_tal_nlin_sym_09a_converted.nii.gz",
    "wm": "mni_icbm152_wm_tal_nlin_sym_09a_converted.nii.gz",
}
SEQUENCES = ("T1", "T1c", "T2", "FLAIR")


def template_dir() -> Path:
    """Folder of nilearn's packaged MNI templates (found without importing nilearn)."""
    spec = importlib.util.find_spec("nilearn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("nilearn is not installed; it provides the MNI ICBM152 templates")
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"


def load_anatomy(spacing: float = 1.0) -> Anatomy:
    """Template T1/GM/WM, resampled to an isotropic spacing when it is not 1 mm, plus CSF and head masks."""
    folder = template_dir()
    images = {k: sitk.ReadImage(str(folder / f), sitk.sitkFloat32) for k, f in TEMPLATE_FILES.items()}
    if abs(spacing - 1.0) > 1e-9:
        ref = images["t1"]
        size = [max(1, round(n * s / spacing)) for n, s in zip(ref.GetSize(), ref.GetSpacing(), strict=True)]
        grid = sitk.Image(size, sitk.sitkFloat32)
        grid.SetSpacing((spacing,) * 3)
        grid.SetDirection(ref.GetDirection())
        grid.SetOrigin(ref.GetOrigin())
        images = {k: sitk.Resample(im, grid, sitk.Transform(), sitk.sitkLinear, 0.0) for k, im in images.items()}
    arr = {k: sitk.GetArrayFromImage(im) for k, im in images.items()}
    t1 = arr["t1"] / max(float(arr["t1"].max()), 1.0)
    gm, wm = np.clip(arr["gm"], 0, 1), np.clip(arr["wm"], 0, 1)
    hull = ndimage.binary_fill_holes(ndimage.binary_closing(gm + wm > 0.2, iterations=3))
    csf = np.clip(1.0 - gm - wm, 0, 1) * hull
    head = t1 > 0.05
    return Anatomy(images["t1"], t1, gm, wm, csf, head)


def synthesise(anat: Anatomy, parts: list[Compartment], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """T1, T1c, T2 and FLAIR intensities with the lesion compartments, noise and a smooth bias field."""
    gm, wm, csf, head = anat.gm, anat.wm, anat.csf, anat.head
    t1 = anat.t1
    # Tissue T1 intensities of this template; T2/FLAIR are piecewise-linear maps of T1 through them,
    # so that they keep the template's partial-volume texture instead of hard tissue classes.
    tissue = [float(np.median(t1[m > 0.7])) if np.any(m > 0.7) else d for m, d in ((csf, 0.15), (gm, 0.45), (wm, 0.7))]
    xs = [0.0, *sorted(tissue), 1.0]
    brain = np.clip(gm + wm + csf, 0, 1)
    scalp = head & (brain < 0.05)
    t2_brain = np.interp(t1, xs, [720.0, 700.0, 420.0, 260.0, 240.0])
    flair_brain = np.interp(t1, xs, [60.0, 90.0, 520.0, 400.0, 380.0])
    base = {
        "T1": 1000.0 * t1,
        "T2": brain * t2_brain + scalp * 1.2 * 1000.0 * t1 * 0.35,
        "FLAIR": brain * flair_brain + scalp * 1000.0 * t1 * 0.3,
    }
    base["T1c"] = base["T1"].copy()
    bias = ndimage.zoom(rng.uniform(0.92, 1.08, size=(4, 4, 4)), np.array(anat.t1.shape) / 4.0, order=3)
    bias = bias[: anat.t1.shape[0], : anat.t1.shape[1], : anat.t1.shape[2]]
    texture = 1.0 + 0.06 * ndimage.gaussian_filter(rng.standard_normal(anat.t1.shape).astype(np.float32), 1.0) * 3
    out = {}
    for seq in SEQUENCES:
        img = base[seq].astype(np.float32)
        ref = float(np.percentile(img[wm > 0.6], 50)) if np.any(wm > 0.6) else float(img.max())
        for part in parts:
            img[part.mask] = ref * CONTRAST[part.kind][seq] * texture[part.mask]
        img = img * bias + rng.normal(0.0, 0.015 * ref, img.shape).astype(np.float32) * head
        out[seq] = np.clip(img, 0, None)
    return out


def _write(arr: np.ndarray, reference: sitk.Image, path: Path, pixel: int) -> None:
    image = sitk.GetImageFromArray(arr)
    image.CopyInformation(reference)
    sitk.WriteImage(sitk.Cast(image, pixel), str(path), useCompression=True)


def write_sequences(folder: Path, anat: Anatomy, seqs: dict[str, np.ndarray], names: dict[str, str]) -> list[str]:
    """Write each sequence as int16 NIfTI under `folder/images/`; returns the relative paths."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    files = []
    for seq, name in names.items():
        rel = f"images/{name}.nii.gz"
        _write(np.rint(seqs[seq]), anat.reference, folder / rel, sitk.sitkInt16)
        files.append(rel)
    return files


def make_brain_case(out_dir: Path, case_id: str, seed: int, spacing: float = 1.0, label: str | None = None) -> Path:
    """Write one brain_mri case pack; the option (A–F) cycles with the seed unless `label` is given."""
    rng = np.random.default_rng(seed)
    letter = label or "ABCDEF"[seed % 6]
    anat = load_anatomy(spacing)
    spec = choose_lesion(letter, anat, rng)
    parts = compartments(spec, anat)
    labels = label_map(parts, anat.t1.shape)
    seqs = synthesise(anat, parts, rng)
    case = out_dir / case_id
    (case / "hidden").mkdir(parents=True, exist_ok=True)
    files = write_sequences(case, anat, seqs, {s: s for s in SEQUENCES})
    _write(labels, anat.reference, case / "hidden" / "mask.nii.gz", sitk.sitkUInt8)
    meta: dict[str, Any] = {
        "case_id": case_id,
        "module": "brain_mri",
        "inputs": {"volumes": files, "default_volume": "FLAIR"},
        "prompt": {
            "template": "brain_mri",
            "csv_id": f"SYN-{seed:05d}",
            "options": BRAIN_OPTIONS,
            "loaded_files": [Path(f).name for f in files],
            "evidence": True,
        },
    }
    truth = {
        "label": letter,
        "diagnosis": BRAIN_OPTIONS[letter],
        "seed": seed,
        "lesion_centre_ras": None if spec is None else [round(v, 3) for v in index_to_ras(anat, spec.centre_ijk)],
        "mask_labels": {"1": "core/cyst/non-enhancing", "2": "oedema", "4": "enhancing"},
    }
    return write_pack(case, meta["module"], meta["inputs"], meta["prompt"], truth)
