"""CAMELYON17 (doi:10.1109/TMI.2018.2867350; camelyon17.grand-challenge.org): `training/center_N/
patient_PPP_node_K.tif`, ASAP XML lesion annotations `training/lesion_annotations/
patient_PPP_node_K.xml` (groups `_0`/`_1` tumour, `_2` exclusion) for a subset of the positive
slides, and `stage_labels.csv` (`patient,stage`: one `patient_PPP.zip,pN…` row per patient, then
one `patient_PPP_node_K.tif,negative|itc|micro|macro` row per slide).

Every labelled slide present becomes a case. A positive slide without an XML keeps its answer
truth and is marked `evidence_scorable: false`: scored on the answer (Strict without evidence, as
the paper allows for slides without a ground-truth evidence source) and left out of Loc.
"""

from __future__ import annotations

import json
from pathlib import Path

from copilot.adapters.common import AdapterReport, column, find_table, place, read_table, unique_rows
from copilot.cases.annotations import to_geojson
from copilot.cases.answers import CAMELYON_LARGEST
from copilot.cases.pack import write_pack
from copilot.cases.wsi import read_asap_xml


def adapt_camelyon17(
    src: str | Path, out: str | Path, stage_csv: str | Path | None = None, copy: bool = False
) -> AdapterReport:
    """Case packs of the CAMELYON17 slides listed in `stage_labels.csv`."""
    src, out = Path(src), Path(out)
    report = AdapterReport("camelyon17")
    csv_path = find_table(
        stage_csv,
        (src, src / "training", src.parent),
        ("stage_labels.csv", "*stage*.csv"),
        "CAMELYON17 stage_labels.csv",
    )
    header, rows = read_table(csv_path)
    name_col = column(header, "patient", required=csv_path.name)
    stage_col = column(header, "stage", required=csv_path.name)
    slide_rows = [r for r in rows if r[name_col].lower().endswith(".tif")]
    patient_rows = len(rows) - len(slide_rows)  # patient-level pN rows (`patient_PPP.zip`)
    unique = unique_rows(slide_rows, lambda r: r[name_col], report, lambda n: Path(n).stem,
                         lambda a, b: a[stage_col].lower() == b[stage_col].lower())  # fmt: skip
    stages = {n: r[stage_col].lower() for n, r in unique.items()}
    report.notes.append(f"{patient_rows} patient-level pN rows not used")
    slides = {p.name: p for p in src.rglob("*.tif")}
    xmls = {p.stem: p for p in src.rglob("*.xml")}
    for name, stage in sorted(stages.items()):
        stem = Path(name).stem
        if stage not in CAMELYON_LARGEST:
            report.skip(stem, f"unknown stage {stage!r}")
            continue
        if name not in slides:
            report.skip(stem, "slide not in the download")
            continue
        try:
            _one(slides[name], stage, xmls.get(stem), out, copy, report)
        except Exception as exc:  # one unreadable slide is reported, the run goes on
            report.fail(stem, exc)
    return report


def _one(slide: Path, stage: str, xml: Path | None, out: Path, copy: bool, report: AdapterReport) -> None:
    case = out / slide.stem
    anns = read_asap_xml(xml) if xml is not None else []
    positive = stage != "negative"
    scorable = not positive or any(a.cls == "Tumor" for a in anns)
    note = None
    if not scorable:
        note = "no lesion annotation XML for this slide" if xml is None else f"no tumour polygon in {xml.name}"
        report.unscorable["evidence"] += 1
    place(slide, case / "images" / "slide.tif", copy)
    (case / "hidden").mkdir(parents=True, exist_ok=True)
    (case / "hidden" / "annotations.geojson").write_text(json.dumps(to_geojson(anns)), encoding="utf-8")
    truth = {
        "tumor_presence": "tumor_present" if positive else "no_tumor",
        "largest_metastasis": stage,
        "source": str(slide),
        "annotation_source": str(xml) if xml is not None else None,
        "evidence_scorable": scorable,
        "evidence_note": note,
    }
    inputs = {"slide": "images/slide.tif", "image_type": "BRIGHTFIELD_H_E"}
    prompt = {"template": "lymph_node_wsi", "case_alias": slide.stem}
    report.cases.append(write_pack(case, "lymph_node_wsi", inputs, prompt, truth))
