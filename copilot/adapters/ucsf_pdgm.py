"""UCSF-PDGM (TCIA, doi:10.7937/tcia.bdgf-8v37): `UCSF-PDGM-NNNN_nifti/UCSF-PDGM-NNNN_{T1,T1c,T2,FLAIR,
tumor_segmentation}.nii.gz` and the metadata CSV (`ID`, `Final pathologic diagnosis (WHO 2021)`).

The CSV's IDs have three digits where the folders have four; subjects are matched by number.
"""

from __future__ import annotations

import csv
from pathlib import Path

from copilot.adapters.common import digits, norm, place, write_pack
from copilot.cases.answers import BRAIN_OPTIONS

SEQUENCES = ("T1", "T1c", "T2", "FLAIR")
DIAGNOSIS_COLUMN = "Final pathologic diagnosis (WHO 2021)"
RULES = (  # first match wins
    ("pilocytic", "E"),
    ("glioblastoma", "A"),
    ("oligodendroglioma", "B"),
    ("astrocytoma", "B"),
    ("dysembryoplastic", "D"),
    ("dnet", "D"),
    ("ganglioglioma", "D"),
    ("neurocytoma", "F"),
    ("ependymoma", "F"),
    ("no tumor", "C"),
    ("normal", "C"),
)


def diagnosis_letter(text: str) -> str | None:
    t = norm(text)
    return next((letter for key, letter in RULES if key in t), None)


def adapt_ucsf_pdgm(
    src: str | Path, out: str | Path, metadata_csv: str | Path | None = None, copy: bool = False
) -> list[Path]:
    src, out = Path(src), Path(out)
    csv_path = Path(metadata_csv) if metadata_csv else next(src.glob("*metadata*.csv"))
    with csv_path.open(newline="", encoding="utf-8-sig") as fh:
        rows = {digits(r["ID"]): r for r in csv.DictReader(fh) if r.get("ID")}
    made = []
    for folder in sorted(p for p in src.iterdir() if p.is_dir() and p.name.endswith("_nifti")):
        stem = folder.name[: -len("_nifti")]
        row = rows.get(digits(stem))
        files = {s: folder / f"{stem}_{s}.nii.gz" for s in SEQUENCES}
        seg = folder / f"{stem}_tumor_segmentation.nii.gz"
        if row is None or not all(f.is_file() for f in files.values()) or not seg.is_file():
            continue
        letter = diagnosis_letter(row.get(DIAGNOSIS_COLUMN, ""))
        if letter is None:
            continue
        case = out / stem
        for s, f in files.items():
            place(f, case / "images" / f"{s}.nii.gz", copy)
        place(seg, case / "hidden" / "mask.nii.gz", copy)
        inputs = {"volumes": [f"images/{s}.nii.gz" for s in SEQUENCES], "default_volume": "FLAIR"}
        prompt = {
            "template": "brain_mri",
            "csv_id": row["ID"],
            "options": BRAIN_OPTIONS,
            "evidence": True,
            "loaded_files": [f"{s}.nii.gz" for s in SEQUENCES],
        }
        made.append(
            write_pack(
                case,
                "brain_mri",
                inputs,
                prompt,
                {"label": letter, "diagnosis": row.get(DIAGNOSIS_COLUMN, ""), "source": str(folder)},
            )
        )
    return made
