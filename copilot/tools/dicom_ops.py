"""Track B DICOM operators: `import_dicom` (a DICOM folder of the case → volumes, described in the scene
inventory) and `export_dicom_seg` (a segment → a DICOM SEG that references its source series, highdicom).

A SEG's Pixel Measures need the slice thickness (Type 1C). Where the source slices lack SliceThickness or
leave it empty, the SEG states the distance between adjacent slice positions along the slice normal (the
loaded volume's slice spacing, itself checked against every ImagePositionPatient); a single slice without
SliceThickness or SpacingBetweenSlices is refused (`missing_slice_thickness`). The source files are not
changed."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pydicom
from pydantic import Field

from copilot.engine.volume.loading import expand_case_path, load_case_volumes
from copilot.errors import HandlerError
from copilot.pacs.store import store_back, store_target
from copilot.tools.args import resolve_case_path
from copilot.tools.dicom_required import complete_sources
from copilot.tools.operators import OPERATOR, NewName
from copilot.tools.radiology import handler
from copilot.tools.registry import HandlerOutput, RadiologyContext
from copilot.tools.seg_sources import seg_sources
from copilot.tools.stored import check_not_stored, remember
from copilot.tools.writes import WritePlan, file_destination, output_file, pacs_destination, quoted, save_dicom


@handler(**OPERATOR)
def import_dicom(
    ctx: RadiologyContext,
    path: Annotated[str, Field(min_length=1, max_length=1024, description="DICOM folder inside the case folder.")],
) -> HandlerOutput:
    """Load the DICOM series of a case folder as new volumes (the scene keeps what it has)."""
    sources = [resolve_case_path(ctx, str(s)) for s in expand_case_path(resolve_case_path(ctx, path))]
    dicom = [s for s in sources if s.is_dir()]
    if not dicom:
        raise HandlerError("not_found", f"no DICOM series in {path!r}")
    added = []
    for vol in load_case_volumes(dicom):
        if ctx.viewer.volume_name_taken(vol.name):
            raise HandlerError("name_taken", f"a volume named {vol.name!r} is already loaded")
        vid = ctx.viewer.add_volume(vol)
        added.append(
            {
                "id": vid,
                "name": vol.name,
                "modality": vol.modality,
                "series": dict(vol.metadata),
                "dimensions": list(vol.dimensions),
                "spacing_mm": [round(s, 6) for s in vol.spacing],
            }
        )
    return HandlerOutput({"imported": added})


def _seg_source(ctx: RadiologyContext, segment: str, output_name: str) -> tuple[str, Any, Any, Path]:
    """The segment (id, node), its DICOM source volume and the file a SEG export would write, or a named refusal."""
    sid, sg = ctx.viewer.segment(segment)
    source = ctx.viewer.volume(sg.source)
    if not Path(source.source).exists() or "SeriesInstanceUID" not in source.metadata:
        raise HandlerError("not_dicom", f"{source.name} was not loaded from a DICOM series; nothing to reference")
    return sid, sg, source, output_file(ctx.output_dir, output_name)


def _seg_digest(sg: Any, source: Any) -> str:
    """What a SEG export writes apart from its UIDs: the segment's voxels and name, and its source."""
    mask = np.ascontiguousarray(sg.mask.data)
    return hashlib.sha256(f"{mask.shape}{mask.dtype}{sg.name}{source.source}".encode() + mask.tobytes()).hexdigest()


def plan_dicom_seg(ctx: RadiologyContext, segment: str, output_name: str) -> WritePlan:
    """What `export_dicom_seg` would write (the segment, its label, its source series) and where, writing nothing."""
    _, sg, source, out = _seg_source(ctx, segment, output_name)
    study = str(source.metadata.get("StudyInstanceUID", ""))
    target = store_target(ctx.case_inputs.get("origin"), [study])
    voxels = int(np.count_nonzero(sg.mask.data))
    what = (
        f"DICOM SEG {output_name!r}: segment {quoted(sg.name, 64)} ({voxels} voxels) over series "
        f"{source.metadata['SeriesInstanceUID']} of study {study or '(unknown)'}; "
        f"a copy kept as {out.parent.name}/{out.name}"
    )
    content = _seg_digest(sg, source)
    check_not_stored(ctx.output_dir, content, f"a SEG of segment {quoted(sg.name, 64)}")
    where = pacs_destination(target) if target else file_destination(out)
    return WritePlan("export_dicom_seg", what, (where,), content=content)


@handler(**OPERATOR, writes=plan_dicom_seg)
def export_dicom_seg(
    ctx: RadiologyContext,
    segment: Annotated[str, Field(min_length=1, max_length=256, description="Segment node id or name.")],
    output_name: NewName,
) -> HandlerOutput:
    """Write a segment as a DICOM SEG (binary) referencing the DICOM series it was made from."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    sid, sg, source, out = _seg_source(ctx, segment, output_name)
    digest = _seg_digest(sg, source)
    check_not_stored(ctx.output_dir, digest, f"a SEG of segment {quoted(sg.name, 64)}")  # said, not stored again
    datasets, frames = seg_sources(source, sg.mask.data)  # single frames in k order, or one multi-frame source
    if len(datasets) == len(frames):  # single-frame sources (a multi-frame one states its own Pixel Measures)
        datasets = _with_slice_thickness(datasets, source.spacing[2] if len(datasets) > 1 else None, source.name)
    complete_sources(datasets, source.name, ("FrameOfReferenceUID",))  # Type 2 left empty; Type 1 refused by name
    desc = hd.seg.SegmentDescription(
        segment_number=1,
        segment_label=sg.name[:64],
        segmented_property_category=codes.SCT.MorphologicallyAbnormalStructure,
        segmented_property_type=codes.SCT.Lesion,
        algorithm_type=hd.seg.SegmentAlgorithmTypeValues.SEMIAUTOMATIC,
        algorithm_identification=hd.AlgorithmIdentificationSequence(
            name=str(sg.provenance.get("operator", "medcopilot")), version="1", family=codes.DCM.ArtificialIntelligence
        ),
    )
    try:
        seg_ds = _segmentation(hd, datasets, frames, desc, output_name)
    except (AttributeError, TypeError, ValueError) as exc:  # highdicom's refusal of a source it cannot describe
        raise HandlerError("invalid_source", f"{source.name}: no valid SEG can reference it ({exc})") from exc
    save_dicom(seg_ds, out)  # owner-only, never through a link
    stored = store_back(ctx.case_inputs.get("origin"), [seg_ds], [out])  # the study's PACS, if it came from one
    remember(out.parent, digest, out.name)
    return HandlerOutput(
        {
            **stored,
            "segment_id": sid,
            "file": out.name,
            "sop_instance_uid": str(seg_ds.SOPInstanceUID),
            "series_instance_uid": str(seg_ds.SeriesInstanceUID),
            "referenced_series_uid": source.metadata["SeriesInstanceUID"],
            "frame_of_reference_uid": str(seg_ds.FrameOfReferenceUID),
        }
    )


def _with_slice_thickness(datasets: list[pydicom.Dataset], spacing: float | None, name: str) -> list[pydicom.Dataset]:
    """The source slices, with SliceThickness taken from the slice positions where it is absent or empty."""
    if all(str(d.get("SliceThickness", "") or "").strip() for d in datasets):
        return datasets
    thickness = spacing or float(datasets[0].get("SpacingBetweenSlices") or 0)
    if not thickness or thickness <= 0:
        raise HandlerError(
            "missing_slice_thickness", f"{name}: one slice without SliceThickness or SpacingBetweenSlices"
        )
    out = []
    for d in datasets:
        if not str(d.get("SliceThickness", "") or "").strip():
            d = d.copy()
            d.SliceThickness = f"{thickness:.6g}"
        out.append(d)
    return out


def _segmentation(hd: Any, datasets: list[pydicom.Dataset], frames: np.ndarray, desc: Any, output_name: str) -> Any:
    """A binary SEG of the mask `frames` (in the sources' order) over the source images (highdicom)."""
    return hd.seg.Segmentation(
        source_images=datasets,
        pixel_array=frames,
        segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
        segment_descriptions=[desc],
        series_instance_uid=hd.UID(),
        series_number=900,
        sop_instance_uid=hd.UID(),
        instance_number=1,
        manufacturer="MedCopilot",
        manufacturer_model_name="MedCopilot",
        software_versions="0.1",
        device_serial_number="embedded",
        series_description=output_name[:64],
        omit_empty_frames=False,
    )
