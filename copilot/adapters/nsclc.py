"""NSCLC Radiogenomics (TCIA, doi:10.7937/K9/TCIA.2017.7hs46erv): DICOM per patient (`R01-NNN/<study>/<series>/`)
with CT, PET and a DICOM SEG of the primary tumour, plus the clinical CSV (`Case ID`, `Histology`,
`Pathological T stage`, `Pathological N stage`, `Histopathological Grade`, `Tumor Location (choice=…)`).

The SEG is read with highdicom onto the CT series it references (the evidence source series); the CT
and PET files are linked file by file into `images/CT/` and `images/PET/`.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pydicom
import SimpleITK as sitk

from copilot.adapters.common import norm, place, write_pack

LOCATIONS = {"rul": "A", "rml": "B", "rll": "C", "lul": "D", "lll": "E", "l lingula": "F", "lingula": "F"}


def t_letter(text: str) -> str:
    t = norm(text)
    for prefix, letter in (("t1", "A"), ("tis", "A"), ("t2", "B"), ("t3", "C"), ("t4", "D")):
        if t.startswith(prefix):
            return letter
    return "E"  # not available / not collected


def n_letter(text: str) -> str:
    t = norm(text)
    return {"n0": "A", "n1": "B", "n2": "C"}.get(t[:2], "D")


def histology_letter(text: str) -> str:
    t = norm(text)
    if "adeno" in t:
        return "A"
    if "squamous" in t:
        return "B"
    return "C" if "small cell" in t else "D"


def grade_letter(text: str) -> str:
    t = norm(text)
    if "type i" in t and "type ii" not in t:
        return "D"
    if "type ii" in t:
        return "E"
    for key, letter in (("g1", "A"), ("well", "A"), ("g2", "B"), ("moderately", "B"), ("g3", "C"), ("poorly", "C")):
        if key in t:
            return letter
    return "F"


def location_letter(row: dict[str, str]) -> str:
    for column, value in row.items():
        if column and column.startswith("Tumor Location (choice=") and norm(value or "") == "checked":
            return LOCATIONS.get(norm(column.split("=", 1)[1].rstrip(")")), "G")
    return "G"


def _series(patient: Path) -> dict[str, list[Path]]:
    """Files per modality (CT, PT, SEG) under a patient folder; the largest CT/PT series is kept."""
    by_uid: dict[tuple[str, str], list[Path]] = {}
    for f in patient.rglob("*"):
        if f.is_file():
            try:
                ds = pydicom.dcmread(f, stop_before_pixels=True)
            except Exception:
                continue
            by_uid.setdefault((str(ds.Modality), str(ds.SeriesInstanceUID)), []).append(f)
    out: dict[str, list[Path]] = {}
    for (modality, _), files in by_uid.items():
        if len(files) > len(out.get(modality, [])):
            out[modality] = sorted(files)
    return out


def seg_to_mask(seg_file: Path, ct_files: list[Path], out: Path) -> Path:
    """The SEG's first segment on the CT grid (slices in SimpleITK's order), written as NIfTI."""
    import highdicom as hd

    reader = sitk.ImageSeriesReader()
    ordered = list(reader.GetGDCMSeriesFileNames(str(ct_files[0].parent)))
    ordered = [f for f in ordered if Path(f) in set(ct_files)] or [str(f) for f in ct_files]
    uids = [str(pydicom.dcmread(f, stop_before_pixels=True).SOPInstanceUID) for f in ordered]
    seg = hd.seg.segread(seg_file)
    pixels = seg.get_pixels_by_source_instance(uids, segment_numbers=[1], combine_segments=True)
    reader.SetFileNames(ordered)
    ct = reader.Execute()
    mask = sitk.GetImageFromArray((np.asarray(pixels) > 0).astype(np.uint8))
    mask.CopyInformation(ct)
    out.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(mask, str(out), True)
    return out


def adapt_nsclc(
    src: str | Path, out: str | Path, clinical_csv: str | Path | None = None, copy: bool = False
) -> list[Path]:
    src, out = Path(src), Path(out)
    csv_path = Path(clinical_csv) if clinical_csv else next(src.glob("*.csv"))
    with csv_path.open(newline="", encoding="utf-8-sig") as fh:
        rows = {r["Case ID"].strip(): {k.strip(): v for k, v in r.items() if k} for r in csv.DictReader(fh)}
    made = []
    for patient in sorted(p for p in src.iterdir() if p.is_dir() and p.name in rows):
        row, series = rows[patient.name], _series(patient)
        if not {"CT", "PT", "SEG"} <= set(series):
            continue
        case = out / patient.name
        for tag, modality in (("CT", "CT"), ("PET", "PT")):
            for f in series[modality]:
                place(f, case / "images" / tag / f.name, copy)
        seg_to_mask(series["SEG"][0], series["CT"], case / "hidden" / "mask.nii.gz")
        answers = {
            "1": location_letter(row),
            "2": t_letter(row.get("Pathological T stage", "")),
            "3": n_letter(row.get("Pathological N stage", "")),
            "4": histology_letter(row.get("Histology", "")),
            "5": grade_letter(row.get("Histopathological Grade", "")),
        }
        inputs = {"volumes": ["images/CT", "images/PET"], "default_volume": "CT"}
        prompt = {
            "template": "lung_petct",
            "default_alias": "diagnostic_ct",
            "source_series": "CT",
            "source_modality": "CT",
            "evidence": True,
            "series": {"diagnostic_ct": "CT", "pet": "PET"},
        }
        made.append(write_pack(case, "lung_petct", inputs, prompt, {"answers": answers, "source_series": "CT"}))
    return made
