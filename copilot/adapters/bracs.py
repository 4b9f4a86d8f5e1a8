"""BRACS (doi:10.1093/database/baac048; bracs.icar.cnr.it): slides `BRACS_WSI/<split>/Group_<G>/
Type_<LABEL>/BRACS_<id>.svs` with the slide label in the `Type_` folder, annotations as QuPath data
`BRACS_WSI_Annotations/<split>/Group_<G>/Type_<LABEL>/BRACS_<id>.qpdata` (or a folder given with
`annotations`), and GeoJSON exported from them as `BRACS_<id>.geojson` or `BRACS_<id>.qpdata.geojson`
(`qupath_ext/export_bracs_geojson.groovy` writes the latter for a whole project in one run).

Annotation class names (`DCIS-sure`, `Malignant-sure`, `Pathological-benign`, …) are mapped to the
seven labels by `copilot/cases/bracs_classes.py` and stored mapped in `hidden/annotations.geojson`
(the original name kept as `source_class`). GeoJSON is preferred; `.qpdata` is read through paquo
where QuPath is installed (`qupath_ext/qpdata.py`). A positive slide with no ROI of its class
(no file, a `.qpdata` without QuPath, or other classes only) is marked `evidence_scorable: false`
with the reason: it is scored on the answer, never silently as a missed ROI.
"""

from __future__ import annotations

import importlib
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from copilot.adapters.common import AdapterReport, place
from copilot.cases.annotations import Annotation, parse_geojson, to_geojson
from copilot.cases.answers import BRACS_LABELS
from copilot.cases.bracs_classes import bracs_label
from copilot.cases.pack import write_pack

SLIDE_SUFFIXES = (".svs", ".tif", ".tiff", ".ndpi", ".mrxs")
ANNOTATION_NAME = re.compile(r"^(BRACS_\d+)(\.qpdata\.geojson|\.geojson|\.qpdata)$", re.IGNORECASE)
QpdataReader = Callable[[Path], list[Annotation]]


def annotation_files(roots: list[Path]) -> dict[str, dict[str, Path]]:
    """Slide id → {'geojson': path, 'qpdata': path} found under the roots, by file name."""
    found: dict[str, dict[str, Path]] = {}
    for root in roots:
        for f in sorted(root.rglob("BRACS_*")):
            m = ANNOTATION_NAME.match(f.name)
            if m and f.is_file():
                kind = "qpdata" if m.group(2).lower() == ".qpdata" else "geojson"
                found.setdefault(m.group(1).upper(), {}).setdefault(kind, f)
    return found


def default_qpdata_reader() -> QpdataReader | None:
    """The paquo reader of `qupath_ext`, where paquo and QuPath are installed; None otherwise."""
    try:
        module = importlib.import_module("qupath_ext.qpdata")
    except ImportError:
        return None
    return module.read_qpdata if module.paquo_available() else None


def _roots(src: Path, annotations: str | Path | None) -> list[Path]:
    if annotations is not None:
        return [Path(annotations)]
    candidates = [src, *(p for p in src.parent.iterdir() if p.is_dir() and "annotation" in p.name.lower())]
    return list(dict.fromkeys(c for c in candidates if c.is_dir()))


def adapt_bracs(
    src: str | Path,
    out: str | Path,
    annotations: str | Path | None = None,
    copy: bool = False,
    qpdata_reader: QpdataReader | None = None,
) -> AdapterReport:
    """Case packs of the BRACS whole-slide images; `annotations` is the annotations folder if not beside."""
    src, out = Path(src), Path(out)
    report = AdapterReport("bracs")
    files = annotation_files(_roots(src, annotations))
    reader = qpdata_reader if qpdata_reader is not None else default_qpdata_reader()
    unmapped: Counter[str] = Counter()
    for slide in sorted(p for p in src.rglob("*") if p.suffix.lower() in SLIDE_SUFFIXES):
        label = next((part[len("Type_") :] for part in slide.parts if part.startswith("Type_")), None)
        if label not in BRACS_LABELS:
            report.skip(slide.stem, "not under a Type_<label> folder")
            continue
        try:
            _one(slide, label, files.get(slide.stem.upper(), {}), reader, out, copy, report, unmapped)
        except Exception as exc:  # one unreadable slide is reported, the run goes on
            report.fail(slide.stem, exc)
    if unmapped:
        report.notes.append("unmapped annotation classes: " + ", ".join(f"{k} ×{n}" for k, n in unmapped.items()))
    return report


def _annotations(
    found: dict[str, Path], reader: QpdataReader | None, skipped: list[dict[str, str]] | None = None
) -> tuple[list[Annotation] | None, str, str]:
    """(annotations or None, source path, why none); GeoJSON objects that are not ground truth go to `skipped`."""
    if "geojson" in found:
        data = json.loads(found["geojson"].read_text(encoding="utf-8"))
        anns, read = parse_geojson(data)
        if skipped is not None:
            skipped.extend(read.skipped)
        return anns, str(found["geojson"]), ""
    if "qpdata" in found:
        if reader is None:
            why = "annotations only as .qpdata and paquo/QuPath are not available: export them with "
            return None, str(found["qpdata"]), why + "qupath_ext/export_bracs_geojson.groovy"
        return reader(found["qpdata"]), str(found["qpdata"]), ""
    return None, "", "no annotation file for this slide"


def _one(
    slide: Path,
    label: str,
    found: dict[str, Path],
    reader: QpdataReader | None,
    out: Path,
    copy: bool,
    report: AdapterReport,
    unmapped: Counter[str],
) -> None:
    case = out / slide.stem
    not_truth: list[dict[str, str]] = []
    anns, source, why = _annotations(found, reader, not_truth)
    if not_truth:
        reasons = Counter(item["reason"] for item in not_truth)
        report.notes.append(
            f"{slide.stem}: {len(not_truth)} GeoJSON object(s) not used as ground truth ("
            + "; ".join(f"{reason} ×{n}" for reason, n in sorted(reasons.items())) + ")"
        )
    mapped: list[Annotation] = []
    for a in anns or []:
        name = bracs_label(a.cls)
        if name is None:
            unmapped[a.cls] += 1
        mapped.append(Annotation(name or a.cls, a.exterior, a.holes))
    place(slide, case / "images" / f"slide{slide.suffix.lower()}", copy)
    if anns is not None:
        collection = to_geojson(mapped)
        for feature, original in zip(collection["features"], anns, strict=True):
            feature["properties"]["source_class"] = original.cls
        (case / "hidden").mkdir(parents=True, exist_ok=True)
        (case / "hidden" / "annotations.geojson").write_text(json.dumps(collection), encoding="utf-8")
    rois = sum(a.cls == label for a in mapped)
    scorable = label == "N" or rois > 0
    note = None
    if not scorable:
        classes = sorted({a.cls for a in anns or []})
        note = why or f"no {label} ROI in {Path(source).name} (classes: {', '.join(classes) or 'none'})"
        report.unscorable["evidence"] += 1
    truth = {
        "label": label,
        "source": str(slide),
        "annotation_source": source or None,
        "rois_of_label": rois,
        "evidence_scorable": scorable,
        "evidence_note": note,
    }
    inputs = {"slide": f"images/slide{slide.suffix.lower()}", "image_type": "BRIGHTFIELD_H_E"}
    prompt = {"template": "breast_wsi", "case_alias": slide.stem}
    report.cases.append(write_pack(case, "breast_wsi", inputs, prompt, truth))
