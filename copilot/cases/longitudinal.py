"""LUMIERE-like longitudinal case packs: OLD and CURRENT studies (CT1, T1, T2, FLAIR) in MNI atlas space.

A glioblastoma-like lesion changes between the studies according to the RANO category drawn for the
case: PD (the enhancing lesion grows ≥ 25 % in the product of diameters, or a new enhancing lesion
appears), SD, PR (≥ 50 % decrease) or CR (no enhancing disease left). The six CURRENT-study fields
follow from what the CURRENT study shows; a field is null (not scorable) when the scenario cannot
decide it, as some LUMIERE ratings are.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from copilot.cases.anatomy import Anatomy
from copilot.cases.answers import RANO_FIELDS, RANO_OPTIONS
from copilot.cases.brain import _write, load_anatomy, synthesise, write_sequences
from copilot.cases.brain_lesions import LesionSpec, choose_lesion, compartments, index_to_ras, label_map
from copilot.cases.pack import write_pack

LUMIERE_SEQUENCES = {"T1c": "CT1", "T1": "T1", "T2": "T2", "FLAIR": "FLAIR"}
SCALE = {"A": 1.35, "B": 1.03, "C": 0.6, "D": 0.0}  # diameter ratio CURRENT / OLD


def _study(
    anat: Anatomy, specs: list[tuple[LesionSpec, float]], rng: np.random.Generator
) -> tuple[Iterator[tuple[str, np.ndarray]], np.ndarray]:
    """A study's sequences (made as they are taken: write one before the next) and its label map."""
    parts = [p for spec, scale in specs for p in compartments(spec, anat, scale)]
    return synthesise(anat, parts, rng), label_map(parts, anat.t1.shape)


def make_longitudinal_case(
    out_dir: Path, case_id: str, seed: int, spacing: float = 1.0, label: str | None = None
) -> Path:
    rng = np.random.default_rng(seed)
    letter = label or "ABCD"[seed % 4]
    anat = load_anatomy(spacing)
    main = choose_lesion("A", anat, rng)
    assert main is not None
    satellite = seed % 3 == 1  # a small (< 10 mm) enhancing non-target lesion present in both studies
    new_lesion = letter == "A" and seed % 2 == 1  # progression by a new measurable lesion
    old_specs: list[tuple[LesionSpec, float]] = [(main, 1.0)]
    cur_specs: list[tuple[LesionSpec, float]] = [(main, 1.0 if new_lesion else SCALE[letter])]
    if satellite:
        sat = choose_lesion("A", anat, rng)
        assert sat is not None
        sat = LesionSpec("A", sat.centre_ijk, 3.5, sat.shape_seed)
        old_specs.append((sat, 1.0))
        cur_specs.append((sat, 0.0 if letter == "D" else 1.0))
    if new_lesion:
        extra = choose_lesion("A", anat, rng)
        assert extra is not None
        cur_specs.append((LesionSpec("A", extra.centre_ijk, 7.0, extra.shape_seed), 1.0))
    case = out_dir / case_id
    (case / "hidden").mkdir(parents=True, exist_ok=True)
    old, old_labels = _study(anat, old_specs, rng)
    del old_labels
    files = write_sequences(case, anat, old, {s: f"OLD_{n}" for s, n in LUMIERE_SEQUENCES.items()})
    cur, cur_labels = _study(anat, cur_specs, rng)  # after the old study's draws, as before
    _write(cur_labels, anat.reference, case / "hidden" / "mask.nii.gz", sitk.sitkUInt8)
    del cur_labels
    files += write_sequences(case, anat, cur, {s: f"CURRENT_{n}" for s, n in LUMIERE_SEQUENCES.items()})
    has_target = letter != "D"
    fields: dict[str, str | None] = {
        "NON_MEASURABLE_LESION": "YES" if satellite and letter != "D" else "NO",
        "T2_PROGRESSION": "YES" if letter == "A" else "NO",
        "CURRENT_TARGET_LESION": "YES" if has_target else "NO",
        "NEW_TARGET_LESION": "YES" if new_lesion else "NO",
        "CURRENT_NON_TARGET_LESION": "YES" if satellite and letter != "D" else "NO",
        "NEW_NON_TARGET_LESION": "NO",
    }
    if seed % 8 == 7:
        fields["NEW_NON_TARGET_LESION"] = None  # not scorable for this case
    assert set(fields) == set(RANO_FIELDS)
    meta: dict[str, Any] = {
        "case_id": case_id,
        "module": "longitudinal_mri",
        "inputs": {
            "volumes": files,
            "default_volume": "CURRENT_CT1",
            "frames_of_reference": {Path(f).name.split(".")[0]: Path(f).name.split("_")[0] for f in files},
        },
        "prompt": {
            "template": "longitudinal_mri",
            "patient_id": f"SYN-{seed:05d}",
            "old_week": "week-000",
            "current_week": f"week-{12 + seed % 40:03d}",
            "options": RANO_OPTIONS,
        },
    }
    truth = {
        "label": letter,
        "rano": RANO_OPTIONS[letter],
        "fields": fields,
        "seed": seed,
        "lesion_centre_ras": [round(v, 3) for v in index_to_ras(anat, main.centre_ijk)],
    }
    return write_pack(case, meta["module"], meta["inputs"], meta["prompt"], truth)
