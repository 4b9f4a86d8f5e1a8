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

from copilot.cases.anatomy import Anatomy, Region, return_freed_memory, standard_normal_volume
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
    """A lesion compartment: its voxels as a mask over a box of the template grid (empty everywhere else)."""

    label: int
    kind: str
    mask: np.ndarray
    region: Region


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
        centre = _snap(anat, centre, round(8 / spacing))
    radius = {"B": (12, 18), "D": (8, 12), "E": (13, 18), "F": (9, 13)}[letter]
    return LesionSpec(letter, centre, float(rng.uniform(*radius)), int(rng.integers(1 << 30)))


def _snap(anat: Anatomy, centre: np.ndarray, reach: int) -> np.ndarray:
    i, j, k = (round(v) for v in centre)
    sl = tuple(slice(max(0, c - reach), c + reach + 1) for c in (k, j, i))
    local = ndimage.uniform_filter(anat.csf(sl), 3)
    kk, jj, ii = np.unravel_index(int(np.argmax(local)), local.shape)
    return np.array([ii + sl[2].start, jj + sl[1].start, kk + sl[0].start], dtype=float)


def _box(shape: tuple[int, ...], centre: np.ndarray, half: np.ndarray) -> Region:
    """The grid box [k, j, i] holding every voxel within `half` voxels of `centre` (i, j, k) along each axis."""
    lo = np.floor(centre - half).astype(int) - 1
    hi = np.ceil(centre + half).astype(int) + 2
    return tuple(slice(max(0, int(lo[a])), max(0, min(shape[2 - a], int(hi[a])))) for a in (2, 1, 0))


def _union(a: Region, b: Region) -> Region:
    return tuple(slice(min(x.start, y.start), max(x.stop, y.stop)) for x, y in zip(a, b, strict=True))


def _radius_field(
    shape: tuple[int, ...], spec: LesionSpec, spacing: float, scale: float, extra: Region | None = None
) -> tuple[Region, np.ndarray]:
    """Distance from the centre in units of the (irregular) lesion radius, over the box beyond which it is
    infinite (widened to hold `extra`): the box and the field in it."""
    rng = np.random.default_rng(spec.shape_seed)
    axes = rng.uniform(0.8, 1.2, size=3)
    c = spec.centre_ijk
    radius_vox = spec.radius_mm * scale / spacing
    reach = int(np.ceil(radius_vox * 2.2 * axes.max())) + 2
    region = _box(shape, c, reach * axes)
    region = region if extra is None else _union(region, extra)
    noise = ndimage.gaussian_filter(standard_normal_volume(rng, shape), max(1.0, 3.0 / spacing))
    spread = max(float(noise.std()), 1e-6)
    local = noise[region] / spread
    del noise
    return_freed_memory()
    kk, jj, ii = np.ogrid[region[0], region[1], region[2]]
    r = np.sqrt(((ii - c[0]) / axes[0]) ** 2 + ((jj - c[1]) / axes[1]) ** 2 + ((kk - c[2]) / axes[2]) ** 2)
    field = r / max(radius_vox, 1e-6) * (1.0 + 0.08 * local)
    field[r > reach] = np.inf
    return region, field


def compartments(spec: LesionSpec | None, anat: Anatomy, scale: float = 1.0) -> list[Compartment]:
    """The lesion's compartments at a size `scale` (1 = as specified; 0 = gone), each over the lesion's box."""
    if spec is None or scale <= 0:
        return []
    spacing = anat.reference.GetSpacing()[0]
    shape = anat.t1.shape
    nod = spec.centre_ijk + np.array([0.6, 0.0, 0.2]) * spec.radius_mm * scale / spacing  # E's mural nodule
    nodule_box = _box(shape, nod, np.full(3, 0.45 * spec.radius_mm * scale / spacing))
    region, r = _radius_field(shape, spec, spacing, scale, nodule_box if spec.letter == "E" else None)
    brain = anat.brain(region) > 0.3
    tissue = (anat.gm[region] + anat.wm[region]) > 0.3

    def part(label: int, kind: str, mask: np.ndarray) -> Compartment:
        return Compartment(label, kind, mask, region)

    if spec.letter == "A":
        return [part(2, "oedema", (r < 1.9) & (r >= 1.0) & tissue),
                part(4, "enhancing", (r < 1.0) & (r >= 0.55) & brain),
                part(1, "necrosis", (r < 0.55) & brain)]  # fmt: skip
    if spec.letter == "B":
        return [part(2, "oedema", (r < 1.25) & (r >= 1.0) & tissue),
                part(1, "nonenhancing", (r < 1.0) & brain)]  # fmt: skip
    if spec.letter == "D":
        rng = np.random.default_rng(spec.shape_seed + 1)
        bubbles = ndimage.gaussian_filter(standard_normal_volume(rng, shape), 1.2)[region] > 0.0
        inner = (r < 0.85) & brain
        return [part(1, "cyst_rim", (r < 1.0) & (r >= 0.85) & brain | (inner & ~bubbles)),
                part(1, "cyst", inner & bubbles)]  # fmt: skip
    if spec.letter == "E":
        kk, jj, ii = np.ogrid[region[0], region[1], region[2]]
        nodule = ((ii - nod[0]) ** 2 + (jj - nod[1]) ** 2 + (kk - nod[2]) ** 2) < (
            0.45 * spec.radius_mm * scale / spacing
        ) ** 2
        cyst = (r < 1.0) & brain
        return [part(1, "cyst", cyst & ~nodule), part(4, "nodule", nodule & brain)]
    if spec.letter == "F":
        return [part(4, "ventricular", (r < 1.0) & brain)]
    raise ValueError(f"unknown option {spec.letter!r}")


def label_map(parts: list[Compartment], shape: tuple[int, ...]) -> np.ndarray:
    """The hidden mask: each compartment's label over its voxels, later compartments over earlier ones."""
    labels = np.zeros(shape, dtype=np.uint8)
    for part in parts:
        labels[part.region][part.mask] = part.label
    return labels
