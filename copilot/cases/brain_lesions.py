"""Brain lesion phenotypes on the MNI template: where each tumour type sits and how it looks per sequence.

Each of the six UCSF-PDGM-like options gets a visible, textbook phenotype:
A glioblastoma (deep white matter; necrotic core, enhancing rim, oedema), B oligodendroglioma /
astrocytoma (frontal cortico-subcortical, FLAIR-bright, non-enhancing), C no tumour, D DNET /
ganglioglioma (temporal cortex, cystic "bubbly" lesion with a FLAIR-bright rim, no enhancement),
E pilocytic astrocytoma (cerebellar cyst with an enhancing mural nodule), F central neurocytoma /
ependymoma (intraventricular enhancing mass). Mask labels follow BraTS: 1 core / cyst /
non-enhancing tumour, 2 oedema, 4 enhancing tumour.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from copilot.cases.anatomy import Anatomy
from copilot.engine.geometry import lps_to_ras, ras_to_lps

# intensity as a multiple of normal white matter on each sequence
CONTRAST: dict[str, dict[str, float]] = {
    "necrosis": {"T1": 0.35, "T1c": 0.35, "T2": 2.3, "FLAIR": 1.2},
    "enhancing": {"T1": 0.7, "T1c": 2.0, "T2": 1.5, "FLAIR": 1.6},
    "oedema": {"T1": 0.8, "T1c": 0.8, "T2": 1.8, "FLAIR": 1.9},
    "nonenhancing": {"T1": 0.6, "T1c": 0.6, "T2": 1.9, "FLAIR": 2.0},
    "cyst": {"T1": 0.25, "T1c": 0.25, "T2": 2.6, "FLAIR": 0.45},
    "cyst_rim": {"T1": 0.6, "T1c": 0.62, "T2": 2.0, "FLAIR": 1.9},
    "nodule": {"T1": 0.7, "T1c": 2.1, "T2": 1.6, "FLAIR": 1.4},
    "ventricular": {"T1": 0.8, "T1c": 1.7, "T2": 1.4, "FLAIR": 1.4},
}
ANCHORS_RAS = {  # MNI RAS mm (right hemisphere; mirrored for the left), jitter in mm
    "B": ((30.0, 32.0, 30.0), 8.0),
    "D": ((50.0, -12.0, -18.0), 5.0),
    "E": ((22.0, -62.0, -34.0), 5.0),
    "F": ((14.0, -8.0, 18.0), 3.0),
}


@dataclass
class Compartment:
    label: int
    kind: str
    mask: np.ndarray


@dataclass
class LesionSpec:
    """Where and how big; the same spec (and `shape_seed`) regrows the same lesion at another scale."""

    letter: str
    centre_ijk: np.ndarray
    radius_mm: float
    shape_seed: int


def ras_to_index(anat: Anatomy, ras: tuple[float, float, float]) -> np.ndarray:
    lps = ras_to_lps(ras)
    return np.array(anat.reference.TransformPhysicalPointToContinuousIndex([float(v) for v in lps]))


def index_to_ras(anat: Anatomy, ijk: np.ndarray) -> list[float]:
    lps = anat.reference.TransformContinuousIndexToPhysicalPoint([float(v) for v in ijk])
    return [float(v) for v in lps_to_ras(lps)]


def choose_lesion(letter: str, anat: Anatomy, rng: np.random.Generator) -> LesionSpec | None:
    """Place a lesion of the given option (None for 'no tumour')."""
    if letter == "C":
        return None
    spacing = anat.reference.GetSpacing()[0]
    side = 1.0 if rng.random() < 0.5 else -1.0
    if letter == "A":
        deep = ndimage.binary_erosion(anat.wm > 0.6, iterations=max(1, round(6 / spacing)))
        cand = np.argwhere(deep)
        mid = ras_to_index(anat, (0.0, 0.0, 0.0))[0]
        cand = cand[np.abs(cand[:, 2] - mid) > 20 / spacing]
        k, j, i = cand[rng.integers(len(cand))]
        return LesionSpec("A", np.array([i, j, k], float), float(rng.uniform(11, 17)), int(rng.integers(1 << 30)))
    (r, a, s), jitter = ANCHORS_RAS[letter]
    centre = ras_to_index(anat, (side * r + rng.uniform(-jitter, jitter), a + rng.uniform(-jitter, jitter),
                                 s + rng.uniform(-jitter, jitter)))  # fmt: skip
    if letter == "F":  # snap to the most CSF-filled point nearby (the ventricle)
        centre = _snap(anat.csf, centre, round(8 / spacing))
    radius = {"B": (12, 18), "D": (8, 12), "E": (13, 18), "F": (9, 13)}[letter]
    return LesionSpec(letter, centre, float(rng.uniform(*radius)), int(rng.integers(1 << 30)))


def _snap(field: np.ndarray, centre: np.ndarray, reach: int) -> np.ndarray:
    i, j, k = (round(v) for v in centre)
    sl = tuple(slice(max(0, c - reach), c + reach + 1) for c in (k, j, i))
    local = ndimage.uniform_filter(field[sl], 3)
    kk, jj, ii = np.unravel_index(int(np.argmax(local)), local.shape)
    return np.array([ii + sl[2].start, jj + sl[1].start, kk + sl[0].start], dtype=float)


def _radius_field(shape: tuple[int, ...], spec: LesionSpec, spacing: float, scale: float) -> np.ndarray:
    """Distance from the centre in units of the (irregular) lesion radius."""
    rng = np.random.default_rng(spec.shape_seed)
    axes = rng.uniform(0.8, 1.2, size=3)
    c = spec.centre_ijk
    radius_vox = spec.radius_mm * scale / spacing
    reach = int(np.ceil(radius_vox * 2.2 * axes.max())) + 2
    kk, jj, ii = np.ogrid[: shape[0], : shape[1], : shape[2]]
    r = np.sqrt(((ii - c[0]) / axes[0]) ** 2 + ((jj - c[1]) / axes[1]) ** 2 + ((kk - c[2]) / axes[2]) ** 2)
    noise = ndimage.gaussian_filter(rng.standard_normal(shape).astype(np.float32), max(1.0, 3.0 / spacing))
    noise /= max(float(noise.std()), 1e-6)
    field = r / max(radius_vox, 1e-6) * (1.0 + 0.08 * noise)
    field[r > reach] = np.inf
    return field


def compartments(spec: LesionSpec | None, anat: Anatomy, scale: float = 1.0) -> list[Compartment]:
    """The lesion's compartments at a size `scale` (1 = as specified; 0 = gone)."""
    if spec is None or scale <= 0:
        return []
    spacing = anat.reference.GetSpacing()[0]
    r = _radius_field(anat.t1.shape, spec, spacing, scale)
    brain = (anat.gm + anat.wm + anat.csf) > 0.3
    tissue = (anat.gm + anat.wm) > 0.3
    if spec.letter == "A":
        return [Compartment(2, "oedema", (r < 1.9) & (r >= 1.0) & tissue),
                Compartment(4, "enhancing", (r < 1.0) & (r >= 0.55) & brain),
                Compartment(1, "necrosis", (r < 0.55) & brain)]  # fmt: skip
    if spec.letter == "B":
        return [Compartment(2, "oedema", (r < 1.25) & (r >= 1.0) & tissue),
                Compartment(1, "nonenhancing", (r < 1.0) & brain)]  # fmt: skip
    if spec.letter == "D":
        rng = np.random.default_rng(spec.shape_seed + 1)
        bubbles = ndimage.gaussian_filter(rng.standard_normal(anat.t1.shape).astype(np.float32), 1.2) > 0.0
        inner = (r < 0.85) & brain
        return [Compartment(1, "cyst_rim", (r < 1.0) & (r >= 0.85) & brain | (inner & ~bubbles)),
                Compartment(1, "cyst", inner & bubbles)]  # fmt: skip
    if spec.letter == "E":
        nod = spec.centre_ijk + np.array([0.6, 0.0, 0.2]) * spec.radius_mm * scale / spacing
        kk, jj, ii = np.ogrid[: r.shape[0], : r.shape[1], : r.shape[2]]
        nodule = ((ii - nod[0]) ** 2 + (jj - nod[1]) ** 2 + (kk - nod[2]) ** 2) < (
            0.45 * spec.radius_mm * scale / spacing
        ) ** 2
        cyst = (r < 1.0) & brain
        return [Compartment(1, "cyst", cyst & ~nodule), Compartment(4, "nodule", nodule & brain)]
    if spec.letter == "F":
        return [Compartment(4, "ventricular", (r < 1.0) & brain)]
    raise ValueError(f"unknown option {spec.letter!r}")


def label_map(parts: list[Compartment], shape: tuple[int, ...]) -> np.ndarray:
    labels = np.zeros(shape, dtype=np.uint8)
    for part in parts:
        labels[part.mask] = part.label
    return labels
