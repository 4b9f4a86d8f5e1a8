"""Synthetic brain-MRI case packs on real anatomy: the MNI ICBM152 2009a templates that nilearn ships.

T1 comes from the template; T2, FLAIR and T1c are synthesised from the grey/white-matter maps
(CSF is what the brain hull holds beyond them) with textbook contrasts. One of six lesion
phenotypes (or none) is placed deterministically per seed;
its labels (BraTS convention 1 core, 2 oedema, 4 enhancing) are the hidden mask. Lesion phenotypes are in
`brain_lesions.py`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk
from scipy import ndimage

from copilot.cases.anatomy import Anatomy, Region, return_freed_memory, standard_normal_volume
from copilot.cases.answers import BRAIN_OPTIONS
from copilot.cases.brain_lesions import CONTRAST, Compartment, choose_lesion, compartments, index_to_ras, label_map
from copilot.cases.pack import write_pack

TEMPLATE_FILES = {
    "t1": "mni_icbm152_t1_tal_nlin_sym_09a_converted.nii.gz",
    "gm": "mni_icbm152_gm_tal_nlin_sym_09a_converted.nii.gz",
    "wm": "mni_icbm152_wm_tal_nlin_sym_09a_converted.nii.gz",
}
SEQUENCES = ("T1", "T1c", "T2", "FLAIR")
SLAB = 8  # slices computed together: a slab's float64 temporaries stay a few MB


def template_dir() -> Path:
    """Folder of nilearn's packaged MNI templates (found without importing nilearn)."""
    spec = importlib.util.find_spec("nilearn")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("nilearn is not installed; it provides the MNI ICBM152 templates")
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"


def load_anatomy(spacing: float = 1.0) -> Anatomy:
    """Template T1/GM/WM, resampled to an isotropic spacing when it is not 1 mm, plus the brain hull and head
    masks; one template image in memory at a time (CSF is computed from the maps where it is needed)."""
    folder = template_dir()
    first = sitk.ReadImage(str(folder / TEMPLATE_FILES["t1"]), sitk.sitkFloat32)
    grid: sitk.Image | None = None
    if abs(spacing - 1.0) > 1e-9:
        size = [max(1, round(n * s / spacing)) for n, s in zip(first.GetSize(), first.GetSpacing(), strict=True)]
        grid = sitk.Image(size, sitk.sitkFloat32)
        grid.SetSpacing((spacing,) * 3)
        grid.SetDirection(first.GetDirection())
        grid.SetOrigin(first.GetOrigin())

    def read(key: str, image: sitk.Image | None = None) -> np.ndarray:
        image = image if image is not None else sitk.ReadImage(str(folder / TEMPLATE_FILES[key]), sitk.sitkFloat32)
        if grid is not None:
            image = sitk.Resample(image, grid, sitk.Transform(), sitk.sitkLinear, 0.0)
        return sitk.GetArrayFromImage(image)

    reference = sitk.Image([1, 1, 1], sitk.sitkUInt8)  # the grid's geometry only
    reference.SetOrigin(first.GetOrigin())
    reference.SetSpacing(first.GetSpacing() if grid is None else grid.GetSpacing())
    reference.SetDirection(first.GetDirection())
    raw = read("t1", first)
    del first
    t1 = raw / max(float(raw.max()), 1.0)
    del raw
    gm, wm = np.clip(read("gm"), 0, 1), np.clip(read("wm"), 0, 1)
    hull = ndimage.binary_fill_holes(ndimage.binary_closing(gm + wm > 0.2, iterations=3))
    anat = Anatomy(reference, t1, gm, wm, hull, t1 > 0.05)
    return_freed_memory()
    return anat


def slabs(shape: tuple[int, ...], depth: int = SLAB) -> Iterator[Region]:
    """Boxes of `depth` slices [k] covering the grid in order."""
    for k in range(0, shape[0], depth):
        yield (slice(k, min(k + depth, shape[0])), slice(None), slice(None))


def _base(anat: Anatomy, xs: list[float], seq: str, box: Region) -> np.ndarray:
    """A sequence's lesion-free intensities in a box (float32): T1 from the template, T2 and FLAIR as
    piecewise-linear maps of T1 through the tissue intensities `xs`."""
    t1 = anat.t1[box]
    if seq in ("T1", "T1c"):
        return (1000.0 * t1).astype(np.float32)
    brain = np.clip(anat.brain(box), 0, 1)
    scalp = anat.head[box] & (brain < 0.05)
    if seq == "T2":
        mapped = brain * np.interp(t1, xs, [720.0, 700.0, 420.0, 260.0, 240.0])
        return (mapped + scalp * 1.2 * 1000.0 * t1 * 0.35).astype(np.float32)
    mapped = brain * np.interp(t1, xs, [60.0, 90.0, 520.0, 400.0, 380.0])
    return (mapped + scalp * 1000.0 * t1 * 0.3).astype(np.float32)


def synthesise(anat: Anatomy, parts: list[Compartment], rng: np.random.Generator) -> Iterator[tuple[str, np.ndarray]]:
    """T1, T1c, T2 and FLAIR intensities with the lesion compartments, noise and a smooth bias field, as int16
    voxels, one sequence at a time (write each before taking the next: a slab of float64 is the largest
    temporary). The random numbers are drawn in the order of the whole-volume computation, so a seed gives the
    same voxels as before."""
    shape = anat.t1.shape
    t1, gm, wm = anat.t1, anat.gm, anat.wm
    # Tissue T1 intensities of this template; T2/FLAIR are piecewise-linear maps of T1 through them,
    # so that they keep the template's partial-volume texture instead of hard tissue classes.
    maps: list[tuple[Callable[[Region], np.ndarray], float]] = [(anat.csf, 0.15), (lambda b: gm[b], 0.45),
                                                                (lambda b: wm[b], 0.7)]  # fmt: skip
    tissue = []
    for tissue_map, default in maps:
        picked = np.concatenate([t1[box][tissue_map(box) > 0.7] for box in slabs(shape)])
        tissue.append(float(np.median(picked)) if picked.size else default)
    xs = [0.0, *sorted(tissue), 1.0]
    knots = rng.uniform(0.92, 1.08, size=(4, 4, 4))
    smooth = ndimage.gaussian_filter(standard_normal_volume(rng, shape), 1.0)
    texture = [1.0 + 0.06 * smooth[part.region][part.mask] * 3 for part in parts]  # only where a lesion is
    del smooth
    return_freed_memory()
    bias = ndimage.zoom(knots, np.array(shape) / 4.0, order=3)[: shape[0], : shape[1], : shape[2]]
    for seq in SEQUENCES:
        picked = np.concatenate([_base(anat, xs, seq, box)[wm[box] > 0.6] for box in slabs(shape)])
        if picked.size:
            ref = float(np.percentile(picked, 50))
        else:
            ref = max(float(_base(anat, xs, seq, box).max()) for box in slabs(shape))
        del picked
        out = np.empty(shape, np.int16)
        for box in slabs(shape):
            img = _base(anat, xs, seq, box)
            for part, tex in zip(parts, texture, strict=True):
                _paint(img, box, part, ref * CONTRAST[part.kind][seq] * tex)
            noise = rng.normal(0.0, 0.015 * ref, img.shape).astype(np.float32)
            img = img * bias[box] + noise * anat.head[box]
            out[box] = _as_int16(np.rint(np.clip(img, 0, None)))
        yield seq, out
        del out  # written by now: never two sequences in memory


def _paint(img: np.ndarray, box: Region, part: Compartment, values: np.ndarray) -> None:
    """Set a slab's voxels inside a compartment to its values (`values`: one per voxel of the compartment, in the
    order a boolean index of its box gives them)."""
    k0, k1 = max(box[0].start, part.region[0].start), min(box[0].stop, part.region[0].stop)
    if k0 >= k1:
        return
    before = np.concatenate([[0], np.cumsum(part.mask.sum(axis=(1, 2)))])  # voxels before each plane of the box
    first, last = k0 - part.region[0].start, k1 - part.region[0].start
    mask = part.mask[first:last]
    img[(slice(k0 - box[0].start, k1 - box[0].start), part.region[1], part.region[2])][mask] = values[
        before[first] : before[last]
    ]


def _as_int16(values: np.ndarray) -> np.ndarray:
    """float64 → int16 exactly as ITK casts them when the NIfTI file is written."""
    return sitk.GetArrayFromImage(sitk.Cast(sitk.GetImageFromArray(values), sitk.sitkInt16))


def _write(arr: np.ndarray, reference: sitk.Image, path: Path, pixel: int) -> None:
    image = sitk.GetImageFromArray(arr)
    image.SetOrigin(reference.GetOrigin())
    image.SetSpacing(reference.GetSpacing())
    image.SetDirection(reference.GetDirection())
    image = image if image.GetPixelID() == pixel else sitk.Cast(image, pixel)  # no second copy when it is already
    sitk.WriteImage(image, str(path), useCompression=True)


def write_sequences(
    folder: Path, anat: Anatomy, seqs: Iterable[tuple[str, np.ndarray]], names: dict[str, str]
) -> list[str]:
    """Write each sequence (int16 voxels, as they come) as NIfTI under `folder/images/`; the relative paths, in the
    order of `names`."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    for seq, voxels in seqs:
        _write(voxels, anat.reference, folder / f"images/{names[seq]}.nii.gz", sitk.sitkInt16)
        del voxels  # before the next sequence is made
        return_freed_memory()
    return [f"images/{name}.nii.gz" for name in names.values()]


def make_brain_case(out_dir: Path, case_id: str, seed: int, spacing: float = 1.0, label: str | None = None) -> Path:
    """Write one brain_mri case pack; the option (A–F) cycles with the seed unless `label` is given."""
    rng = np.random.default_rng(seed)
    letter = label or "ABCDEF"[seed % 6]
    anat = load_anatomy(spacing)
    spec = choose_lesion(letter, anat, rng)
    parts = compartments(spec, anat)
    case = out_dir / case_id
    (case / "hidden").mkdir(parents=True, exist_ok=True)
    _write(label_map(parts, anat.t1.shape), anat.reference, case / "hidden" / "mask.nii.gz", sitk.sitkUInt8)
    seqs = synthesise(anat, parts, rng)
    files = write_sequences(case, anat, seqs, {s: s for s in SEQUENCES})  # each written as it is made
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
