"""`export_slide_annotations`: the slide evidence — recorded points and the regions of the recorded views — as
DICOM Microscopy Bulk Simple Annotations (highdicom) referencing the slide when it is a DICOM whole-slide image,
else as GeoJSON (QuPath imports it as annotations) for a slide file.

Points are level-0 pixel positions (x = column, y = row, from the image's top left); in DICOM they become the
slide coordinate system (mm, 3D) through the slide's own position, orientation and pixel spacing, one annotation
group for points (POINT) and one for regions (POLYGON).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pydicom

import copilot
from copilot.errors import HandlerError
from copilot.pacs.store import store_back, store_target
from copilot.pacs.wsi import WSI_SOP_CLASS
from copilot.privatefs import private_dir, write_private
from copilot.tools.args import resolve_case_path
from copilot.tools.operators import NewName
from copilot.tools.pathology import handler
from copilot.tools.registry import HandlerOutput, SlideContext
from copilot.tools.writes import WritePlan, file_destination, output_file, pacs_destination

Point = tuple[float, float, str]  # level-0 x, y and a label
Region = tuple[list[tuple[float, float]], str]  # a closed outline's corners and a label


def slide_items(evidence: list[dict[str, Any]]) -> tuple[list[Point], list[Region]]:
    """The points (recorded points, an answer's slide points) and regions (each recorded view's visible region)."""
    points: list[Point] = []
    regions: list[Region] = []
    for rec in evidence:
        label = str(rec.get("label") or f"{rec.get('kind')} {rec.get('evidence_id', '')}").strip()
        point = rec.get("point")
        if isinstance(point, dict) and "x" in point and "y" in point:
            points.append((float(point["x"]), float(point["y"]), label))
        box = rec.get("visible_region")
        if rec.get("kind") == "view" and isinstance(box, list) and len(box) == 4:
            x0, y0, x1, y1 = (float(v) for v in box)
            regions.append(([(x0, y0), (x1, y0), (x1, y1), (x0, y1)], label))
    return points, regions


def geojson(points: list[Point], regions: list[Region]) -> dict[str, Any]:
    """The items as a GeoJSON FeatureCollection of QuPath annotations (level-0 pixels)."""
    def feature(geometry: dict[str, Any], name: str) -> dict[str, Any]:
        return {"type": "Feature", "geometry": geometry, "properties": {"objectType": "annotation", "name": name}}

    features = [feature({"type": "Point", "coordinates": [x, y]}, label) for x, y, label in points]
    features += [feature({"type": "Polygon", "coordinates": [[*[list(c) for c in corners], list(corners[0])]]}, label)
                 for corners, label in regions]  # fmt: skip
    return {"type": "FeatureCollection", "features": features}


def to_slide_mm(source: pydicom.Dataset, xy: np.ndarray) -> np.ndarray:
    """Level-0 pixel positions (column, row) → the slide coordinate system (mm) of a DICOM whole-slide image."""
    import highdicom as hd

    origin = source.TotalPixelMatrixOriginSequence[0]
    spacing = source.SharedFunctionalGroupsSequence[0].PixelMeasuresSequence[0].PixelSpacing
    affine = hd.spatial.PixelToReferenceTransformer(
        [float(origin.XOffsetInSlideCoordinateSystem), float(origin.YOffsetInSlideCoordinateSystem), 0.0],
        [float(v) for v in source.ImageOrientationSlide], [float(v) for v in spacing],
    ).affine  # fmt: skip
    hom = np.column_stack([xy, np.zeros(len(xy)), np.ones(len(xy))])
    return np.asarray(hom @ np.asarray(affine).T)[:, :3]


def build_ann(source: pydicom.Dataset, points: list[Point], regions: list[Region], title: str) -> Any:
    """The Microscopy Bulk Simple Annotations of the items on the slide `source` (its level-0 instance)."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    groups: list[Any] = []
    for number, (graphic, shapes, labels) in enumerate([
        ("POINT", [np.array([[x, y]]) for x, y, _ in points], [p[2] for p in points]),
        ("POLYGON", [np.array(corners) for corners, _ in regions], [r[1] for r in regions]),
    ]):  # fmt: skip
        if not shapes:
            continue
        groups.append(hd.ann.AnnotationGroup(
            number=len(groups) + 1, uid=hd.UID(), label="points" if number == 0 else "regions",
            annotated_property_category=codes.SCT.MorphologicallyAbnormalStructure,
            annotated_property_type=codes.SCT.Neoplasm, graphic_type=graphic,
            graphic_data=[to_slide_mm(source, s) for s in shapes], algorithm_type="MANUAL",
            description="; ".join(labels)[:10240]))  # fmt: skip
    ann = hd.ann.MicroscopyBulkSimpleAnnotations(
        source_images=[source], annotation_coordinate_type="3D", annotation_groups=groups,
        series_instance_uid=hd.UID(), series_number=904, sop_instance_uid=hd.UID(), instance_number=1,
        manufacturer="MedCopilot", manufacturer_model_name="MedCopilot", software_versions=copilot.__version__,
        device_serial_number="MedCopilot", content_label="EVIDENCE", content_description=title[:64],
    )  # fmt: skip
    ann.Laterality = ""  # General Series (Type 2C): a slide has none
    return ann


def _slide(ctx: SlideContext) -> tuple[Path, pydicom.Dataset | None]:
    """The slide file and, for a DICOM whole-slide image, its header."""
    rel = ctx.case_inputs.get("slide")
    if not rel:
        raise HandlerError("invalid_arguments", "this case lists no slide")
    path = Path(resolve_case_path(ctx, str(rel)))
    try:
        ds = pydicom.dcmread(path, stop_before_pixels=True)
    except Exception:  # not DICOM: a slide file (TIFF, SVS, …)
        return path, None
    return path, ds if str(ds.get("SOPClassUID") or "") == WSI_SOP_CLASS else None


def _plan(ctx: SlideContext, output_name: str) -> tuple[Path, pydicom.Dataset | None, list[Point], list[Region]]:
    points, regions = slide_items(ctx.evidence)
    if not points and not regions:
        raise HandlerError("no_evidence", "no slide point or recorded view to store yet")
    # a slide a host shows (QuPath's open image) is not a case input: its evidence goes out as GeoJSON
    source = _slide(ctx)[1] if ctx.case_inputs.get("slide") else None
    out = output_file(ctx.output_dir, output_name, ".dcm" if source is not None else ".geojson")
    return out, source, points, regions


def plan_slide_annotations(ctx: SlideContext, output_name: str) -> WritePlan:
    """What `export_slide_annotations` would write (how many points and regions, as what) and where."""
    out, source, points, regions = _plan(ctx, output_name)
    what = (f"{'DICOM microscopy bulk annotations (ANN)' if source is not None else 'GeoJSON annotations'} "
            f"{output_name!r}: {len(points)} point(s), {len(regions)} region(s)")  # fmt: skip
    target = store_target(ctx.case_inputs.get("origin"), [str(source.StudyInstanceUID)]) if source else None
    return WritePlan("export_slide_annotations", what, (pacs_destination(target) if target else file_destination(out),))


@handler(role="analysis_operator", tracks=("B",), writes=plan_slide_annotations)
def export_slide_annotations(ctx: SlideContext, output_name: NewName) -> HandlerOutput:
    """Write the slide evidence (points, recorded views' regions) as DICOM bulk annotations referencing a DICOM
    slide (stored to its PACS when it came from one), or as GeoJSON annotations beside a slide file."""
    out, source, points, regions = _plan(ctx, output_name)
    private_dir(out.parent)
    if source is None:
        write_private(out, json.dumps(geojson(points, regions), indent=1) + "\n")
        return HandlerOutput({"file": out.name, "points": len(points), "regions": len(regions), "stored_to": "file"})
    ann = build_ann(source, points, regions, output_name)
    ann.save_as(out)
    stored = store_back(ctx.case_inputs.get("origin"), [ann], [out])
    return HandlerOutput({"file": out.name, "points": len(points), "regions": len(regions), **stored})
