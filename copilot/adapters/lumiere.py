"""LUMIERE (figshare, doi:10.6084/m9.figshare.c.5904905): `Patient-NNN/week-WWW[-k]/DeepBraTumIA-segmentation/
atlas/{skull_strip/{ct1,t1,t2,flair}_skull_strip.nii.gz, segmentation/seg_mask.nii.gz}` and the expert
rating CSV (`Patient`, `Date` = week folder, `Rating` = CR/PR/SD/PD).

Each rated time point becomes a CURRENT study paired with the patient's previous time point (OLD).
The six CURRENT-study fields are read from CSV columns of the same names when the CSV has them
(YES/NO, anything else = not scorable); otherwise they are left not scorable.
"""

from __future__ import annotations

import csv
from pathlib import Path

from copilot.adapters.common import digits, place, write_pack
from copilot.cases.answers import RANO_FIELDS, RANO_OPTIONS

SEQS = {"CT1": "ct1", "T1": "t1", "T2": "t2", "FLAIR": "flair"}
LETTER = {v: k for k, v in RANO_OPTIONS.items()}


def _study(folder: Path) -> dict[str, Path] | None:
    base = folder / "DeepBraTumIA-segmentation" / "atlas"
    files = {n: base / "skull_strip" / f"{s}_skull_strip.nii.gz" for n, s in SEQS.items()}
    return files if all(f.is_file() for f in files.values()) else None


def _field(value: str | None) -> str | None:
    v = (value or "").strip().upper()
    return v if v in ("YES", "NO") else None


def adapt_lumiere(
    src: str | Path, out: str | Path, rating_csv: str | Path | None = None, copy: bool = False
) -> list[Path]:
    src, out = Path(src), Path(out)
    csv_path = Path(rating_csv) if rating_csv else next(src.glob("*Rating*.csv"))
    with csv_path.open(newline="", encoding="utf-8-sig") as fh:
        ratings = list(csv.DictReader(fh))
    made = []
    for row in ratings:
        rating = (row.get("Rating") or "").strip().upper()
        if rating not in LETTER:
            continue
        patient = src / row["Patient"].strip()
        weeks = sorted(
            (p for p in patient.glob("week-*") if p.is_dir()), key=lambda p: (digits(p.name.split("-")[1]) or 0, p.name)
        )
        names = [w.name for w in weeks]
        current = row["Date"].strip()
        if current not in names or names.index(current) == 0:
            continue
        cur, old = _study(weeks[names.index(current)]), _study(weeks[names.index(current) - 1])
        seg = weeks[names.index(current)] / "DeepBraTumIA-segmentation" / "atlas" / "segmentation" / "seg_mask.nii.gz"
        if cur is None or old is None:
            continue
        case = out / f"{patient.name}__{names[names.index(current) - 1]}__to__{current}"
        files = []
        for tag, study in (("OLD", old), ("CURRENT", cur)):
            for name, path in study.items():
                place(path, case / "images" / f"{tag}_{name}.nii.gz", copy)
                files.append(f"images/{tag}_{name}.nii.gz")
        if seg.is_file():
            place(seg, case / "hidden" / "mask.nii.gz", copy)
        truth = {"label": LETTER[rating], "rano": rating, "fields": {f: _field(row.get(f)) for f in RANO_FIELDS}}
        prompt = {
            "template": "longitudinal_mri",
            "patient_id": patient.name,
            "options": RANO_OPTIONS,
            "old_week": names[names.index(current) - 1],
            "current_week": current,
        }
        made.append(
            write_pack(case, "longitudinal_mri", {"volumes": files, "default_volume": "CURRENT_CT1"}, prompt, truth)
        )
    return made
