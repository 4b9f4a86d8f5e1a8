"""`export_evidence_sr`: the session's evidence as a DICOM measurement report (TID 1500, Comprehensive 3D SR)
that references the source images, with MedCopilot named as the observer device; stored back to the PACS the
study came from (STOW-RS) or written as a file.

Key slices become measurement groups (TID 1501) referencing the image at the view's centre; points and
distances become planar ROI groups (TID 1410) whose SCOORD3D regions are in the patient coordinate system
(LPS: RAS with the first two axes negated) of the source frame of reference, a distance with its length in mm.
A key slice on a multi-frame source references its frame by number. Evidence on volumes that were not loaded
from a DICOM series (NIfTI files, derived volumes) and bookmarks are left out, and counted. The question asked
and the answer given, when passed, are TEXT items (Request, Finding) of the report's Qualitative Evaluations
container (TID 1500 allows TEXT there), so the care team reads them beside the measurements.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pydicom
from pydantic import Field

import copilot
from copilot.engine.volume.dicom_multiframe import frame_count
from copilot.engine.volume.dicom_sources import SourceFrame, source_frames
from copilot.errors import HandlerError
from copilot.pacs.store import store_back, store_target
from copilot.tools.dicom_required import complete_sources
from copilot.tools.operators import OPERATOR, NewName
from copilot.tools.radiology import handler
from copilot.tools.registry import HandlerOutput, RadiologyContext
from copilot.tools.writes import WritePlan, file_destination, pacs_destination

OBSERVER_UID = pydicom.uid.generate_uid(entropy_srcs=["MedCopilot observer device"])
Text = Annotated[str, Field(max_length=20000, description="Text the report carries verbatim ('' for none).")]


def ras_to_lps(ras: list[float]) -> list[float]:
    """RAS millimetres → DICOM patient coordinates (LPS)."""
    return [-float(ras[0]), -float(ras[1]), float(ras[2])]


def _source_series(ctx: RadiologyContext, vid: str, cache: dict[str, list[SourceFrame] | None]) -> Any:
    """The source image (and frame, in a multi-frame instance) of each slice of a volume, in the volume's k
    order, or None when it has none."""
    if vid in cache:
        return cache[vid]
    try:
        vol = ctx.viewer.volume(vid)
    except (KeyError, HandlerError):
        cache[vid] = None
        return None
    cache[vid] = source_frames(vol)
    return cache[vid]


def _groups(ctx: RadiologyContext) -> tuple[list[Any], list[pydicom.Dataset], dict[str, int], list[str]]:
    """The report's measurement groups, the source instances they reference, counts per kind, and the labels the
    groups carry."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    cache: dict[str, list[SourceFrame] | None] = {}
    groups: list[Any] = []
    used: dict[str, pydicom.Dataset] = {}
    counts = {"key_slices": 0, "points": 0, "distances": 0, "left_out": 0}
    labels: list[str] = []

    def tracking(rec: dict[str, Any], what: str) -> Any:
        label = (f"{what} {rec['evidence_id']}" + (f": {rec['label']}" if rec.get("label") else ""))[:64]
        labels.append(label)
        return hd.sr.TrackingIdentifier(uid=hd.UID(), identifier=label)

    def region(points: list[list[float]], series: list[SourceFrame], kind: str) -> Any:
        lps = np.array([ras_to_lps(p) for p in points], dtype=np.float64)
        return hd.sr.ImageRegion3D(kind, lps, str(series[0].dataset.FrameOfReferenceUID))

    for rec in ctx.evidence:
        kind = rec.get("kind")
        vid = rec.get("volume_id") or (rec.get("a") or {}).get("volume_id")
        series = _source_series(ctx, str(vid), cache) if vid else None
        if series is None or kind not in ("key_slice", "point", "distance"):
            counts["left_out"] += 1
            continue
        for source in series:
            used[str(source.dataset.SOPInstanceUID)] = source.dataset
        if kind == "key_slice":
            k = int(np.clip(np.rint(rec["ijk_at_view_centre"][2]), 0, len(series) - 1))
            frame = [series[k].frame] if series[k].frame else None  # a multi-frame source: the slice's frame
            groups.append(
                hd.sr.MeasurementsAndQualitativeEvaluations(
                    tracking(rec, "key slice"),
                    finding_type=codes.DCM.Finding,
                    source_images=[hd.sr.SourceImageForMeasurementGroup.from_source_image(series[k].dataset, frame)],
                )
            )
            counts["key_slices"] += 1
        elif kind == "point":
            groups.append(
                hd.sr.PlanarROIMeasurementsAndQualitativeEvaluations(
                    tracking(rec, "point"), referenced_region=region([rec["ras"]], series, "POINT"),
                    finding_type=codes.DCM.Finding,
                )
            )  # fmt: skip
            counts["points"] += 1
        else:
            length = hd.sr.Measurement(
                name=codes.SCT.Length, value=float(rec["distance_mm"]), unit=codes.UCUM.Millimeter
            )
            groups.append(
                hd.sr.PlanarROIMeasurementsAndQualitativeEvaluations(
                    tracking(rec, "distance"),
                    referenced_region=region([rec["a"]["ras"], rec["b"]["ras"]], series, "POLYLINE"),
                    finding_type=codes.DCM.Finding, measurements=[length],
                )
            )  # fmt: skip
            counts["distances"] += 1
    return groups, list(used.values()), counts, labels


def _texts(question: str, answer: str) -> Any:
    """The Qualitative Evaluations container (TID 1500) holding the question (Request) and the answer (Finding) as
    TEXT items; None when both are empty."""
    import highdicom as hd
    from pydicom.sr.codedict import codes
    from pydicom.sr.coding import Code

    items = [(codes.DCM.Request, question.strip()), (codes.DCM.Finding, answer.strip())]
    container = hd.sr.ContainerContentItem(
        name=Code("C0034375", "UMLS", "Qualitative Evaluations"),
        relationship_type="CONTAINS",
        is_content_continuous=False,
    )
    container.ContentSequence = hd.sr.ContentSequence(
        [hd.sr.TextContentItem(name=name, value=text, relationship_type="CONTAINS") for name, text in items if text]
    )
    return container if len(container.ContentSequence) else None


def build_evidence_sr(
    ctx: RadiologyContext, title: str, question: str = "", answer: str = ""
) -> tuple[Any, dict[str, int]]:
    """The Comprehensive 3D SR of the session's evidence (and the question and answer, when given), and what it
    holds."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    groups, sources, counts, _ = _checked_groups(ctx, bool(question.strip() or answer.strip()))
    device = hd.sr.DeviceObserverIdentifyingAttributes(
        uid=OBSERVER_UID, name="MedCopilot", manufacturer_name="MedCopilot", model_name="MedCopilot"
    )
    context = hd.sr.ObservationContext(
        observer_device_context=hd.sr.ObserverContext(
            observer_type=codes.DCM.Device, observer_identifying_attributes=device
        )
    )
    placeholder = [hd.sr.MeasurementsAndQualitativeEvaluations(hd.sr.TrackingIdentifier(uid=hd.UID(), identifier="-"))]
    report = hd.sr.MeasurementReport(
        observation_context=context, procedure_reported=codes.SCT.ImagingProcedure,
        imaging_measurements=groups or placeholder, referenced_images=_library(sources),
    )  # fmt: skip
    root = report[0].ContentSequence
    if not groups:  # the text alone: TID 1500 needs one of its containers, the Qualitative Evaluations will do
        root[:] = [item for item in root if item.ConceptNameCodeSequence[0].CodeValue != "126010"]
    texts = _texts(question, answer)
    if texts is not None:
        root.append(texts)
    sr = hd.sr.Comprehensive3DSR(
        evidence=sources, content=report, series_instance_uid=hd.UID(), series_number=901,
        sop_instance_uid=hd.UID(), instance_number=1, manufacturer="MedCopilot",
        series_description=title[:64], institution_name=None, is_complete=True, is_final=False,
        is_verified=False,
    )  # fmt: skip
    sr.SoftwareVersions = copilot.__version__
    return sr, counts


def _library(sources: list[pydicom.Dataset]) -> list[pydicom.Dataset] | None:
    """The images the report's image library describes: single-frame ones (highdicom describes an image by its
    own PixelSpacing and position; a multi-frame source is referenced by the evidence and its frames alone)."""
    single = [ds for ds in sources if frame_count(ds) == 1]
    return single or None


def _shown_sources(ctx: RadiologyContext) -> list[pydicom.Dataset]:
    """The instances of every volume loaded from a DICOM series: what a report of text alone refers to."""
    cache: dict[str, list[SourceFrame] | None] = {}
    found: dict[str, pydicom.Dataset] = {}
    for vol in ctx.viewer.state().get("volumes") or []:
        for source in _source_series(ctx, str(vol["id"]), cache) or []:
            found[str(source.dataset.SOPInstanceUID)] = source.dataset
    return list(found.values())


def _checked_groups(
    ctx: RadiologyContext, text: bool = False
) -> tuple[list[Any], list[pydicom.Dataset], dict[str, int], list[str]]:
    """`_groups`, refused by name when there is nothing to report or the evidence spans several studies; with
    `text` (a question or answer to carry), no evidence is a report on the DICOM series shown."""
    groups, sources, counts, labels = _groups(ctx)
    if not groups and text:
        sources = _shown_sources(ctx)
    if not groups and not sources:
        raise HandlerError("no_evidence", "no key slice, point or distance on a DICOM series to report yet")
    complete_sources(sources, "the evidence's source series")  # before any UID is read: missing ones refused by name
    if len({str(ds.StudyInstanceUID) for ds in sources}) > 1:
        raise HandlerError("several_studies", "the evidence lies on series of several studies; one report each")
    return groups, sources, counts, labels


def _output_file(ctx: RadiologyContext, output_name: str) -> Path:
    """The file an export writes in the session's derived folder (refused when there is none, or it exists)."""
    if ctx.output_dir is None:
        raise HandlerError("no_output", "this session has no output folder (start it with a trace directory)")
    out = ctx.output_dir / f"{output_name}.dcm"
    if out.exists():
        raise HandlerError("name_taken", f"{out.name} exists already")
    return out


def plan_evidence_sr(ctx: RadiologyContext, output_name: str, question: str = "", answer: str = "") -> WritePlan:
    """What `export_evidence_sr` would write (the report's groups and labels, its text, its study) and where,
    writing nothing."""
    out = _output_file(ctx, output_name)
    _, sources, counts, labels = _checked_groups(ctx, bool(question.strip() or answer.strip()))
    study = str(sources[0].StudyInstanceUID)
    target = store_target(ctx.case_inputs.get("origin"), [study])
    what = (
        f"DICOM measurement report (Comprehensive 3D SR) {output_name!r} of study {study}: {counts['key_slices']} key "
        f"slice(s), {counts['points']} point(s), {counts['distances']} distance(s)"
        + (f" ({counts['left_out']} evidence item(s) left out)" if counts["left_out"] else "")
        + (f"; labels: {'; '.join(labels)}" if labels else "; no evidence: the text alone, on the series shown")
        + (f"; question: «{question.strip()}»" if question.strip() else "")
        + (f"; answer: «{answer.strip()}»" if answer.strip() else "")
        + f"; a copy kept as derived/{out.name}"
    )
    where = pacs_destination(target) if target else file_destination(out)
    return WritePlan("export_evidence_sr", what, (where,))


@handler(**OPERATOR, writes=plan_evidence_sr)
def export_evidence_sr(
    ctx: RadiologyContext, output_name: NewName, question: Text = "", answer: Text = ""
) -> HandlerOutput:
    """Write the session's evidence (key slices, points, distances) as a DICOM measurement report referencing
    the source images, with the question and answer as its text; stored to the study's PACS when it came from one."""
    out = _output_file(ctx, output_name)
    sr, counts = build_evidence_sr(ctx, output_name, question, answer)
    out.parent.mkdir(parents=True, exist_ok=True)
    sr.save_as(out)
    stored = store_back(ctx.case_inputs.get("origin"), [sr], [out])
    return HandlerOutput({"file": out.name, **counts, **stored})
