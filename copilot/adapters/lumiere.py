"""LUMIERE (figshare, doi:10.6084/m9.figshare.c.5904905): `Imaging/Patient-NNN/week-WWW[-k]/
DeepBraTumIA-segmentation/atlas/{skull_strip/{ct1,t1,t2,flair}_skull_strip.nii.gz,
segmentation/seg_mask.nii.gz}` and, beside `Imaging/`, the expert rating table
`LUMIERE-ExpertRating-v202211.csv`: `Patient`, `Date` (the week folder), `LessThan3Months`,
`NonMeasurableLesions` (`x` or empty), the rating under a long header (`Rating (according to RANO,
PD: Progressive disease, …)`) and `Rating rationale (CRET: …, T2-Progr.: T2-Progression, L: Lesion)`.

Each rated time point becomes a CURRENT study paired with the patient's previous time point (OLD).
Lesion-state fields, only where the release states them: NON_MEASURABLE_LESION = YES where
`NonMeasurableLesions` is `x` (an empty cell does not say there is none); from the rationale,
T2_PROGRESSION = YES for `T2-Progr.`, NEW_TARGET_LESION = YES for "new target", and
NEW_NON_TARGET_LESION = YES for "new non-target" / "new non-measurable" (a rationale that does not
mention them is not a NO). Columns named exactly like a field (curated tables) are read as YES/NO.
Every other field is unscorable (None) and counted in the run summary.
"""

from __future__ import annotations

import re
from pathlib import Path

from copilot.adapters.common import (
    AdapterReport,
    column,
    digits,
    find_table,
    place,
    read_table,
    unique_rows,
)
from copilot.cases.answers import RANO_FIELDS, RANO_OPTIONS
from copilot.cases.pack import write_pack

SEQS = {"CT1": "ct1", "T1": "t1", "T2": "t2", "FLAIR": "flair"}
LETTER = {v: k for k, v in RANO_OPTIONS.items()}
RATIONALE = {  # field → wording in the rating rationale that states it (YES)
    "T2_PROGRESSION": re.compile(r"t2[\s-]*progr", re.IGNORECASE),
    "NEW_TARGET_LESION": re.compile(r"\bnew\s+target", re.IGNORECASE),
    "NEW_NON_TARGET_LESION": re.compile(r"\bnew\s+non[\s-]*(?:target|measurable)", re.IGNORECASE),
}


def _study(folder: Path) -> dict[str, Path] | None:
    base = folder / "DeepBraTumIA-segmentation" / "atlas"
    files = {n: base / "skull_strip" / f"{s}_skull_strip.nii.gz" for n, s in SEQS.items()}
    return files if all(f.is_file() for f in files.values()) else None


def _yes_no(value: str | None) -> str | None:
    v = (value or "").strip().upper()
    return v if v in ("YES", "NO") else None


def _week_key(name: str) -> tuple[int, int, str]:
    """week-044 → (44, 0); week-000-2 → (0, 2): the order of the study folders."""
    m = re.match(r"week-(\d+)(?:-(\d+))?", name)
    return (int(m.group(1)), int(m.group(2) or 0), name) if m else (digits(name) or 0, 0, name)


def _fields(row: dict[str, str], header: list[str], cols: dict[str, str | None]) -> dict[str, str | None]:
    fields: dict[str, str | None] = {f: _yes_no(row.get(column(header, f) or "")) for f in RANO_FIELDS}
    if cols["nonmeasurable"] is not None and row[cols["nonmeasurable"]].lower() == "x":
        fields["NON_MEASURABLE_LESION"] = fields["NON_MEASURABLE_LESION"] or "YES"
    rationale = row.get(cols["rationale"] or "", "")
    for name, wording in RATIONALE.items():
        if fields[name] is None and wording.search(rationale):
            fields[name] = "YES"
    return fields


def adapt_lumiere(
    src: str | Path, out: str | Path, rating_csv: str | Path | None = None, copy: bool = False
) -> AdapterReport:
    """Case packs of the LUMIERE release; `src` is the dataset folder or its `Imaging/` folder."""
    src, out = Path(src), Path(out)
    imaging = src / "Imaging" if (src / "Imaging").is_dir() else src
    report = AdapterReport("lumiere")
    csv_path = find_table(
        rating_csv, (imaging.parent, imaging), ("*ExpertRating*.csv", "*Rating*.csv"), "LUMIERE expert rating CSV"
    )
    header, rows = read_table(csv_path)
    patient_col = column(header, "Patient", required=csv_path.name)
    date_col = column(header, "Date", "Timepoint", required=csv_path.name)
    rating_col = column(header, "Rating", "RANO", prefix="Rating (", required=csv_path.name)
    cols = {
        "patient": patient_col,
        "date": date_col,
        "rating": rating_col,
        "rationale": column(header, "RatingRationale", prefix="Rating rationale"),
        "nonmeasurable": column(header, "NonMeasurableLesions"),
        "early": column(header, "LessThan3Months"),
    }
    if cols["nonmeasurable"] is None:
        report.notes.append("no NonMeasurableLesions column: NON_MEASURABLE_LESION unscorable")
    by_key = unique_rows(rows, lambda r: (r[patient_col], r[date_col]), report, "__".join)
    for (patient_id, week), row in by_key.items():
        case_id = f"{patient_id}__{week}"
        rating = row[rating_col].upper()
        if rating not in LETTER:
            report.skip(case_id, "not a response rating (Pre-Op, Post-Op, …)")
            continue
        extra = {"less_than_3_months": row[cols["early"]].lower() == "x"} if cols["early"] else {}
        try:
            _one(imaging, patient_id, week, rating, _fields(row, header, cols), extra, out, copy, report)
        except Exception as exc:  # one bad patient is reported, the run goes on
            report.fail(case_id, exc)
    return report


def _one(
    imaging: Path,
    patient_id: str,
    current: str,
    rating: str,
    fields: dict[str, str | None],
    extra: dict[str, bool],
    out: Path,
    copy: bool,
    report: AdapterReport,
) -> None:
    case_id = f"{patient_id}__{current}"
    patient = imaging / patient_id
    weeks = sorted((p for p in patient.glob("week-*") if p.is_dir()), key=lambda p: _week_key(p.name))
    names = [w.name for w in weeks]
    if current not in names:
        report.skip(case_id, "no imaging for the rated week")
        return
    i = names.index(current)
    if i == 0:
        report.skip(case_id, "no previous time point")
        return
    cur, old = _study(weeks[i]), _study(weeks[i - 1])
    if cur is None or old is None:
        report.skip(case_id, "missing skull-stripped sequences")
        return
    seg = weeks[i] / "DeepBraTumIA-segmentation" / "atlas" / "segmentation" / "seg_mask.nii.gz"
    case = out / f"{patient.name}__{names[i - 1]}__to__{current}"
    files = []
    for tag, study in (("OLD", old), ("CURRENT", cur)):
        for name, path in study.items():
            place(path, case / "images" / f"{tag}_{name}.nii.gz", copy)
            files.append(f"images/{tag}_{name}.nii.gz")
    if seg.is_file():
        place(seg, case / "hidden" / "mask.nii.gz", copy)
    for name, value in fields.items():
        if value is None:
            report.unscorable[name] += 1
    truth = {"label": LETTER[rating], "rano": rating, "fields": fields, **extra}
    prompt = {
        "template": "longitudinal_mri",
        "patient_id": patient.name,
        "options": RANO_OPTIONS,
        "old_week": names[i - 1],
        "current_week": current,
    }
    inputs = {"volumes": files, "default_volume": "CURRENT_CT1"}
    report.cases.append(write_pack(case, "longitudinal_mri", inputs, prompt, truth))
