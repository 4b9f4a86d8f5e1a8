"""BRACS annotation class names → the seven slide labels (N, PB, UDH, FEA, ADH, DCIS, IC).

The released QuPath annotations name their classes `<type>-sure` (`DCIS-sure`, `ADH-sure`,
`Malignant-sure`, `Benign-sure`, `Pathological-benign`, …), with misspelt variants
(`Pathologica benign`); `-non` marks an annotation the pathologist was not sure of. Names are
compared lower-cased with runs of spaces, hyphens and underscores as one space, and a trailing
`sure` dropped. Uncertain (`-non`) and unknown names map to None: they are never scored.
"""

from __future__ import annotations

import re

BRACS_CLASSES: dict[str, str] = {
    # normal tissue ("Benign" in the BRACS annotation vocabulary)
    "n": "N", "normal": "N", "benign": "N",
    # pathological benign
    "pb": "PB", "pathological benign": "PB", "pathologica benign": "PB", "pathological bening": "PB",
    # usual ductal hyperplasia
    "udh": "UDH", "usual ductal hyperplasia": "UDH",
    # flat epithelial atypia
    "fea": "FEA", "flat epithelial atypia": "FEA",
    # atypical ductal hyperplasia
    "adh": "ADH", "atypical ductal hyperplasia": "ADH",
    # ductal carcinoma in situ
    "dcis": "DCIS", "ductal carcinoma in situ": "DCIS",
    # invasive carcinoma ("Malignant" in the BRACS annotation vocabulary)
    "ic": "IC", "malignant": "IC", "invasive": "IC", "invasive carcinoma": "IC",
}  # fmt: skip


def class_key(name: str) -> str:
    """`DCIS-sure` → 'dcis'; `Pathological-benign` → 'pathological benign'; `ADH-non` → 'adh non'."""
    key = re.sub(r"[\s_\-]+", " ", name.strip().lower()).strip()
    return re.sub(r"\s*\bsure$", "", key).strip()


def bracs_label(name: str) -> str | None:
    """The BRACS label of an annotation class name; None when uncertain (`-non`) or unknown."""
    key = class_key(name)
    if key.endswith(" non") or key.startswith("non "):
        return None
    return BRACS_CLASSES.get(key)
