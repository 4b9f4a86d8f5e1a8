"""CAMELYON17 (doi:10.1109/TMI.2018.2867350; camelyon17.grand-challenge.org): `center_N/patient_PPP_node_K.tif`,
ASAP XML lesion annotations `lesion_annotations/patient_PPP_node_K.xml` (groups `_0`/`_1` tumour, `_2`
exclusion) and `stage_labels.csv` (`patient`, `stage`: negative / itc / micro / macro per slide)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from copilot.adapters.common import place, write_pack
from copilot.cases.annotations import to_geojson
from copilot.cases.wsi import read_asap_xml

STAGES = ("negative", "itc", "micro", "macro")


def adapt_camelyon17(
    src: str | Path, out: str | Path, stage_csv: str | Path | None = None, copy: bool = False
) -> list[Path]:
    src, out = Path(src), Path(out)
    csv_path = Path(stage_csv) if stage_csv else next(src.rglob("stage_labels.csv"))
    with csv_path.open(newline="", encoding="utf-8-sig") as fh:
        stages = {r["patient"].strip(): r["stage"].strip().lower() for r in csv.DictReader(fh)}
    slides = {p.name: p for p in src.rglob("*.tif")}
    xmls = {p.stem: p for p in src.rglob("*.xml")}
    made = []
    for name, stage in sorted(stages.items()):
        if stage not in STAGES or name not in slides:
            continue
        stem = Path(name).stem
        if stage != "negative" and stem not in xmls:
            continue  # a positive slide without its annotation cannot be scored for evidence
        case = out / stem
        place(slides[name], case / "images" / "slide.tif", copy)
        (case / "hidden").mkdir(parents=True, exist_ok=True)
        anns = read_asap_xml(xmls[stem]) if stem in xmls else []
        (case / "hidden" / "annotations.geojson").write_text(json.dumps(to_geojson(anns)), encoding="utf-8")
        truth = {
            "tumor_presence": "no_tumor" if stage == "negative" else "tumor_present",
            "largest_metastasis": stage,
            "source": str(slides[name]),
        }
        made.append(
            write_pack(
                case,
                "lymph_node_wsi",
                {"slide": "images/slide.tif", "image_type": "BRIGHTFIELD_H_E"},
                {"template": "lymph_node_wsi", "case_alias": stem},
                truth,
            )
        )
    return made
