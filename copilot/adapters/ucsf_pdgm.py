"""UCSF-PDGM (TCIA, doi:10.7937/tcia.bdgf-8v37): `UCSF-PDGM-NNNN_nifti/UCSF-PDGM-NNNN_{T1,T1c,T2,FLAIR,
tumor_segmentation}.nii.gz` and the metadata CSV (`UCSF-PDGM-metadata_v2.csv` … `_v5.csv`: `ID`,
`Final pathologic diagnosis (WHO 2021)`, …).

Identifiers: the CSV writes baselines with three digits (`UCSF-PDGM-004`) where the folders have four
(`UCSF-PDGM-0004_nifti`); metadata v5 adds follow-up studies of patients already in the set
(`UCSF-PDGM-0433_FU007d`, folder `UCSF-PDGM-0433_FU007d_nifti`). A study is keyed by (patient number,
follow-up tag) and only ever matched to the row with the same key. Follow-ups are excluded by
default (a second study of a patient already in the benchmark); `follow_ups="include"` makes each
its own case, labelled from its own row.
"""

from __future__ import annotations

import re
from pathlib import Path

from copilot.adapters.common import (
    AdapterError,
    AdapterReport,
    column,
    find_table,
    norm,
    place,
    read_table,
    unique_rows,
)
from copilot.cases.answers import BRAIN_OPTIONS
from copilot.cases.pack import write_pack

SEQUENCES = ("T1", "T1c", "T2", "FLAIR")
DIAGNOSIS_COLUMN = "Final pathologic diagnosis (WHO 2021)"
STUDY_ID = re.compile(r"^UCSF-PDGM-(\d+)(?:_(FU\d+d))?$", re.IGNORECASE)

# Every diagnosis string of the released metadata (v2–v5), mapped explicitly to the paper's options.
DIAGNOSES = {
    "Glioblastoma, IDH-wildtype": "A",
    "Astrocytoma, IDH-mutant": "B",
    "Astrocytoma, IDH-wildtype": "B",
    "Oligodendroglioma, IDH-mutant, 1p/19q-codeleted": "B",
}
RULES = (  # other spellings (other releases, hand-made tables); first match wins
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
_EXACT = {norm(k): v for k, v in DIAGNOSES.items()}


def diagnosis_letter(text: str) -> str | None:
    """The option letter of a diagnosis string: the release's own strings exactly, then keyword rules."""
    t = norm(text)
    if t in _EXACT:
        return _EXACT[t]
    return next((letter for key, letter in RULES if key in t), None)


def study_key(text: str) -> tuple[int, str] | None:
    """(patient number, follow-up tag or '') of a CSV ID or folder stem; None if it is not a UCSF-PDGM id."""
    m = STUDY_ID.match(text.strip())
    return (int(m.group(1)), (m.group(2) or "").upper()) if m else None


def _metadata(csv_path: Path, report: AdapterReport) -> dict[tuple[int, str], dict[str, str]]:
    header, rows = read_table(csv_path)
    id_col = column(header, "ID", required=csv_path.name)
    dx_col = column(header, DIAGNOSIS_COLUMN, prefix="Final pathologic diagnosis", required=csv_path.name)
    keyed = []
    for row in rows:
        if study_key(row[id_col]) is None:
            report.skip(row[id_col] or "(empty ID)", "metadata row without a UCSF-PDGM id")
        else:
            keyed.append({"ID": row[id_col], "diagnosis": row[dx_col]})
    return unique_rows(
        keyed,
        lambda r: study_key(r["ID"]) or (0, ""),  # rows without a study id were skipped above
        report,
        lambda k: f"UCSF-PDGM-{k[0]:04d}" + (f"_{k[1]}" if k[1] else ""),
        lambda a, b: norm(a["diagnosis"]) == norm(b["diagnosis"]),
    )


def adapt_ucsf_pdgm(
    src: str | Path,
    out: str | Path,
    metadata_csv: str | Path | None = None,
    copy: bool = False,
    follow_ups: str = "exclude",
) -> AdapterReport:
    """Case packs of the UCSF-PDGM release; `follow_ups` is 'exclude' (default) or 'include'."""
    if follow_ups not in ("exclude", "include"):
        raise AdapterError("follow_ups must be 'exclude' or 'include'")
    src, out = Path(src), Path(out)
    report = AdapterReport("ucsf_pdgm")
    csv_path = find_table(metadata_csv, (src, src.parent), ("*metadata*.csv",), "UCSF-PDGM metadata CSV")
    rows = _metadata(csv_path, report)
    for folder in sorted(p for p in src.iterdir() if p.is_dir() and p.name.endswith("_nifti")):
        stem = folder.name[: -len("_nifti")]
        key = study_key(stem)
        if key is None:
            report.skip(stem, "folder name is not a UCSF-PDGM id")
            continue
        if key[1] and follow_ups == "exclude":
            report.skip(stem, "follow-up study (excluded by rule)")
            continue
        try:
            _one(folder, stem, rows.get(key), out, copy, report)
        except Exception as exc:  # one bad study is reported, the run goes on
            report.fail(stem, exc)
    return report


def _one(folder: Path, stem: str, row: dict[str, str] | None, out: Path, copy: bool, report: AdapterReport) -> None:
    if row is None:
        report.skip(stem, "no metadata row")
        return
    files = {s: folder / f"{stem}_{s}.nii.gz" for s in SEQUENCES}
    seg = folder / f"{stem}_tumor_segmentation.nii.gz"
    if not all(f.is_file() for f in files.values()) or not seg.is_file():
        report.skip(stem, "missing sequence or segmentation file")
        return
    letter = diagnosis_letter(row["diagnosis"])
    if letter is None:
        report.skip(stem, f"unmapped diagnosis {row['diagnosis']!r}")
        return
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
    truth = {"label": letter, "diagnosis": row["diagnosis"], "csv_id": row["ID"], "source": str(folder)}
    report.cases.append(write_pack(case, "brain_mri", inputs, prompt, truth))
