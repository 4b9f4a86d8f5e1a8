"""BRACS (doi:10.1093/database/baac048; bracs.icar.cnr.it): `BRACS_WSI/<split>/Group_<G>/Type_<LABEL>/*.svs`
with the slide label in the `Type_` folder, and QuPath GeoJSON annotations (one file per slide, same
stem) under an annotations folder."""

from __future__ import annotations

from pathlib import Path

from copilot.adapters.common import place, write_pack
from copilot.cases.answers import BRACS_LABELS

SLIDE_SUFFIXES = (".svs", ".tif", ".tiff", ".ndpi", ".mrxs")


def adapt_bracs(
    src: str | Path, out: str | Path, annotations: str | Path | None = None, copy: bool = False
) -> list[Path]:
    src, out = Path(src), Path(out)
    ann_root = Path(annotations) if annotations else src
    geojson = {p.stem: p for p in ann_root.rglob("*.geojson")}
    made = []
    for slide in sorted(p for p in src.rglob("*") if p.suffix.lower() in SLIDE_SUFFIXES):
        label = next((part[len("Type_") :] for part in slide.parts if part.startswith("Type_")), None)
        if label not in BRACS_LABELS:
            continue
        case = out / slide.stem
        place(slide, case / "images" / f"slide{slide.suffix.lower()}", copy)
        if slide.stem in geojson:
            place(geojson[slide.stem], case / "hidden" / "annotations.geojson", copy)
        inputs = {"slide": f"images/slide{slide.suffix.lower()}", "image_type": "BRIGHTFIELD_H_E"}
        made.append(
            write_pack(
                case,
                "breast_wsi",
                inputs,
                {"template": "breast_wsi", "case_alias": slide.stem},
                {"label": label, "source": str(slide)},
            )
        )
    return made
