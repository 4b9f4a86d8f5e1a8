"""NSCLC Radiogenomics (TCIA, doi:10.7937/K9/TCIA.2017.7hs46erv): DICOM per patient as the NBIA
retriever writes it (`R01-NNN/<date>-NA-<study>-NNNNN/<n>.000000-<series>-NNNNN/1-NNN.dcm`) with CT,
PET and a DICOM SEG of the primary tumour, plus the clinical table
(`NSCLCR01Radiogenomic_DATA_LABELS_2018-05-22_1500-shifted.csv`: `Case ID`, `Histology ` with a
trailing space, `Pathological T stage`, `Pathological N stage`, `Histopathological Grade`,
`Tumor Location (choice=RUL|RML|RLL|LUL|LLL|L Lingula|Unknown)` = Checked/Unchecked).

The evidence series is the CT series the SEG references (never "the largest CT"); a patient whose
SEGs reference no CT series of the download, or several, is reported and skipped. The SEG is read
with highdicom onto that series (slices the SEG does not cover are empty). Values the options cannot
express (`Not Collected` grade, `Unknown` location, several lobes) are unscorable (None), never
"No tumor". AMC patients (`AMC-NNN`) are excluded by default, as in the paper's 162-case set.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
import SimpleITK as sitk

from copilot.adapters.common import (
    AdapterReport,
    column,
    find_table,
    norm,
    place,
    read_table,
    unique_rows,
)
from copilot.cases.pack import write_pack

LOCATIONS = {"rul": "A", "rml": "B", "rll": "C", "lul": "D", "lll": "E", "l lingula": "F", "lingula": "F"}
T_STAGES = {"tis": "A", "t1": "A", "t1a": "A", "t1b": "A", "t1c": "A", "t2": "B", "t2a": "B", "t2b": "B",
            "t3": "C", "t4": "D", "not collected": "E", "not available": "E"}  # fmt: skip
N_STAGES = {"n0": "A", "n1": "B", "n2": "C", "not collected": "D", "not available": "D"}
HISTOLOGY = {"adenocarcinoma": "A", "squamous cell carcinoma": "B", "small cell carcinoma": "C",
             "nsclc nos not otherwise specified": "D"}  # fmt: skip
GRADES = {
    "g1 well differentiated": "A",
    "g2 moderately differentiated": "B",
    "g3 poorly differentiated": "C",
    "other type i well to moderately differentiated": "D",
    "other type ii moderately to poorly differentiated": "E",
}
QUESTIONS = {"1": "tumor location", "2": "pathological T stage", "3": "pathological N stage",
             "4": "histology", "5": "histopathological grade"}  # fmt: skip


def t_letter(text: str) -> str | None:
    return T_STAGES.get(norm(text))


def n_letter(text: str) -> str | None:
    return N_STAGES.get(norm(text))


def histology_letter(text: str) -> str | None:
    t = norm(text)
    if t in HISTOLOGY:
        return HISTOLOGY[t]
    if "adeno" in t:
        return "A"
    if "squamous" in t:
        return "B"
    if "small cell" in t and "non small" not in t:
        return "C"
    return "D" if t and t not in ("not collected", "unknown") else None


def grade_letter(text: str) -> str | None:
    return GRADES.get(norm(text))


def location_letter(row: dict[str, str]) -> str | None:
    """The one checked lobe; None when the location is Unknown, unchecked everywhere or several lobes."""
    checked = [
        norm(col.split("=", 1)[1].rstrip(") "))
        for col, value in row.items()
        if norm(col).startswith("tumor location choice") and "=" in col and norm(value) == "checked"
    ]
    lobes = {LOCATIONS.get(c) for c in checked}
    return lobes.pop() if len(lobes) == 1 and None not in lobes else None


def _series(patient: Path) -> dict[tuple[str, str], list[Path]]:
    """Files per (modality, SeriesInstanceUID) under a patient folder."""
    by_uid: dict[tuple[str, str], list[Path]] = {}
    for f in sorted(patient.rglob("*")):
        if f.is_file():
            try:
                ds = pydicom.dcmread(f, stop_before_pixels=True)
                key = (str(ds.Modality), str(ds.SeriesInstanceUID))
            except Exception:
                continue
            by_uid.setdefault(key, []).append(f)
    return by_uid


def _ordered(files: list[Path], series_uid: str) -> list[str]:
    """The series' files in SimpleITK's slice order."""
    folders = sorted({f.parent for f in files})
    if len(folders) == 1:
        names = sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folders[0]), series_uid)
        if len(names) == len(files):
            return list(names)

    def position(f: Path) -> float:
        ds = pydicom.dcmread(f, stop_before_pixels=True)
        normal = np.cross(*np.reshape(np.asarray(ds.ImageOrientationPatient, float), (2, 3)))
        return float(np.dot(normal, np.asarray(ds.ImagePositionPatient, float)))

    return [str(f) for f in sorted(files, key=position)]


def seg_to_mask(seg_file: Path, ct_files: list[Path], out: Path, series_uid: str | None = None) -> Path:
    """The SEG's first segment on the CT grid (slices in SimpleITK's order), written as NIfTI."""
    import highdicom as hd

    uid = series_uid or str(pydicom.dcmread(ct_files[0], stop_before_pixels=True).SeriesInstanceUID)
    ordered = _ordered(ct_files, uid)
    uids = [str(pydicom.dcmread(f, stop_before_pixels=True).SOPInstanceUID) for f in ordered]
    seg = hd.seg.segread(seg_file)
    pixels = seg.get_pixels_by_source_instance(
        uids, segment_numbers=[1], combine_segments=True, assert_missing_frames_are_empty=True
    )
    reader = sitk.ImageSeriesReader()
    reader.SetFileNames(ordered)
    ct = reader.Execute()
    mask = sitk.GetImageFromArray((np.asarray(pixels) > 0).astype(np.uint8))
    mask.CopyInformation(ct)
    out.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(mask, str(out), True)
    return out


def referenced_series(seg_file: Path) -> set[str]:
    """SeriesInstanceUIDs of the images a SEG was drawn on."""
    import highdicom as hd

    return {str(series) for _, series, _ in hd.seg.segread(seg_file).get_source_image_uids()}


def adapt_nsclc(
    src: str | Path,
    out: str | Path,
    clinical_csv: str | Path | None = None,
    copy: bool = False,
    include_amc: bool = False,
) -> AdapterReport:
    """Case packs of NSCLC Radiogenomics: one per patient with CT, PET, a SEG and a clinical row."""
    src, out = Path(src), Path(out)
    report = AdapterReport("nsclc")
    csv_path = find_table(
        clinical_csv, (src, src.parent), ("*Radiogenomic*.csv", "*DATA_LABELS*.csv", "*.csv"), "NSCLC clinical CSV"
    )
    header, table = read_table(csv_path)
    id_col = column(header, "Case ID", required=csv_path.name)
    cols: dict[str, str | None] = {
        "T": column(header, "Pathological T stage", required=csv_path.name),
        "N": column(header, "Pathological N stage", required=csv_path.name),
        "histology": column(header, "Histology", required=csv_path.name),
        "grade": column(header, "Histopathological Grade", required=csv_path.name),
    }
    rows = unique_rows(table, lambda r: r[id_col], report, str)
    for patient in sorted(p for p in src.iterdir() if p.is_dir()):
        if patient.name not in rows:
            report.skip(patient.name, "no clinical row")
            continue
        if patient.name.upper().startswith("AMC") and not include_amc:
            report.skip(patient.name, "AMC cohort (excluded by default)")
            continue
        try:
            _one(patient, rows[patient.name], cols, out, copy, report)
        except Exception as exc:  # one unreadable patient is reported, the run goes on
            report.fail(patient.name, exc)
    return report


def _one(
    patient: Path, row: dict[str, str], cols: dict[str, str | None], out: Path, copy: bool, report: AdapterReport
) -> None:
    series = _series(patient)
    segs = [files for (modality, _), files in series.items() if modality == "SEG"]
    cts = {uid: files for (modality, uid), files in series.items() if modality == "CT"}
    pets = sorted(((uid, files) for (m, uid), files in series.items() if m == "PT"), key=lambda s: -len(s[1]))
    if not segs:
        report.skip(patient.name, "no SEG")
        return
    if not pets:
        report.skip(patient.name, "no PET series")
        return
    refs = {f: referenced_series(f) & set(cts) for files in segs for f in files}
    referenced = set().union(*refs.values())
    if not referenced:
        report.skip(patient.name, "SEG references no CT series of the download")
        return
    if len(referenced) > 1:
        report.skip(patient.name, "ambiguous: SEGs reference several CT series")
        return
    ct_uid = referenced.pop()
    seg_file = next(f for f, uids in refs.items() if ct_uid in uids)
    if len(pets) > 1:
        report.notes.append(f"{patient.name}: {len(pets)} PET series, the largest is loaded")
    case = out / patient.name
    for tag, files in (("CT", cts[ct_uid]), ("PET", pets[0][1])):
        for f in files:
            place(f, case / "images" / tag / f.name, copy)
    seg_to_mask(seg_file, cts[ct_uid], case / "hidden" / "mask.nii.gz", ct_uid)
    answers = {
        "1": location_letter(row),
        "2": t_letter(row[cols["T"] or ""]),
        "3": n_letter(row[cols["N"] or ""]),
        "4": histology_letter(row[cols["histology"] or ""]),
        "5": grade_letter(row[cols["grade"] or ""]),
    }
    for q, letter in answers.items():
        if letter is None:
            report.unscorable[QUESTIONS[q]] += 1
    inputs = {"volumes": ["images/CT", "images/PET"], "default_volume": "CT"}
    prompt = {
        "template": "lung_petct",
        "default_alias": "diagnostic_ct",
        "source_series": "CT",
        "source_modality": "CT",
        "evidence": True,
        "series": {"diagnostic_ct": "CT", "pet": "PET"},
    }
    truth = {
        "answers": answers,
        "source_series": "CT",
        "source_series_uid": ct_uid,
        "seg": str(seg_file),
        "clinical": {k: row[c] for k, c in cols.items() if c},
    }
    report.cases.append(write_pack(case, "lung_petct", inputs, prompt, truth))
