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

from typing import Annotated, Any

import pydicom
from pydantic import Field

import copilot
from copilot.engine.volume.dicom_multiframe import frame_count
from copilot.engine.volume.dicom_sources import SourceFrame, source_frames
from copilot.errors import HandlerError
from copilot.pacs.store import store_back, store_target
from copilot.tools.dicom_required import complete_sources
from copilot.tools.operators import OPERATOR, NewName
from copilot.tools.pacs_reports import session_book
from copilot.tools.radiology import handler
from copilot.tools.registry import HandlerOutput, RadiologyContext
from copilot.tools.sr_content import Content, build_content, content_digest
from copilot.tools.sr_quantities import ras_to_lps
from copilot.tools.stored import check_not_stored, remember
from copilot.tools.tracking import LesionBook
from copilot.tools.writes import WritePlan, file_destination, output_file, pacs_destination, quoted, save_dicom

__all__ = ["build_evidence_sr", "export_evidence_sr", "plan_evidence_sr", "ras_to_lps"]

OBSERVER_UID = pydicom.uid.generate_uid(entropy_srcs=["MedCopilot observer device"])
Text = Annotated[str, Field(max_length=20000, description="Text the report carries verbatim ('' for none).")]
EvidenceIds = Annotated[
    list[Annotated[int, Field(ge=1, le=100000)]] | None,
    Field(max_length=1000, description="Numbers of the evidence records to report (omitted: all of them)."),
]


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


def _content(ctx: RadiologyContext, book: LesionBook | None, evidence_ids: list[int] | None) -> Content:
    """The report's groups of the session's evidence (the records numbered in `evidence_ids`, else all)."""
    cache: dict[str, list[SourceFrame] | None] = {}
    wanted = set(evidence_ids) if evidence_ids is not None else None
    if wanted is not None and (unknown := wanted - {int(r.get("evidence_id") or 0) for r in ctx.evidence}):
        raise HandlerError("invalid_arguments", f"no evidence record numbered {sorted(unknown)}")
    return build_content(ctx.evidence, lambda vid: _source_series(ctx, vid, cache), book, wanted)


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
    ctx: RadiologyContext, title: str, question: str = "", answer: str = "", book: LesionBook | None = None,
    evidence_ids: list[int] | None = None,
) -> tuple[Any, Content]:
    """The Comprehensive 3D SR of the session's evidence (the records numbered in `evidence_ids`, else all; the
    question and answer, when given), and what it holds; `book` gives tracked lesions their UIDs."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    content = _checked_content(ctx, bool(question.strip() or answer.strip()), book, evidence_ids)
    groups, sources = content.groups, content.sources
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
    return sr, content


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


def _checked_content(
    ctx: RadiologyContext, text: bool = False, book: LesionBook | None = None, evidence_ids: list[int] | None = None
) -> Content:
    """`_content`, refused by name when there is nothing to report or the evidence spans several studies; with
    `text` (a question or answer to carry), no evidence is a report on the DICOM series shown."""
    content = _content(ctx, book, evidence_ids)
    if not content.groups and text:
        content.sources = _shown_sources(ctx)
    if not content.groups and not content.sources:
        raise HandlerError("no_evidence", "no key slice, point or distance (nor a measurement) on a DICOM series "
                           "to report yet")
    complete_sources(content.sources, "the evidence's source series")  # before any UID is read: missing ones named
    if len({str(ds.StudyInstanceUID) for ds in content.sources}) > 1:
        raise HandlerError("several_studies", "the evidence lies on series of several studies; one report each")
    return content


def _lesion_book(ctx: RadiologyContext, sources: list[pydicom.Dataset]) -> LesionBook:
    """The session's tracked lesions of this patient, with the places earlier reports are looked for."""
    book: LesionBook = session_book(ctx, sources[0])
    return book


def plan_evidence_sr(
    ctx: RadiologyContext, output_name: str, question: str = "", answer: str = "", evidence_ids: list[int] | None = None
) -> WritePlan:
    """What `export_evidence_sr` would write (the report's groups and labels, its text, its study) and where,
    writing nothing; refused when the same content is stored already."""
    out = output_file(ctx.output_dir, output_name)
    content = _checked_content(ctx, bool(question.strip() or answer.strip()), None, evidence_ids)
    check_not_stored(ctx.output_dir, content_digest(content, question, answer), "a measurement report")
    sources, counts, labels = content.sources, content.counts, content.labels
    study = str(sources[0].StudyInstanceUID)
    target = store_target(ctx.case_inputs.get("origin"), [study])
    what = (
        f"DICOM measurement report (Comprehensive 3D SR) {output_name!r} of study {study}: {counts['key_slices']} key "
        f"slice(s), {counts['points']} point(s), {counts['distances']} distance(s), {counts['measurements']} "
        "measurement(s)"
        + (f" ({counts['repeated']} restated item(s) stored once)" if counts["repeated"] else "")
        + (f" ({counts['left_out']} evidence item(s) left out)" if counts["left_out"] else "")
        + (f"; labels: {'; '.join(quoted(x, 64) for x in labels)}" if labels
           else "; no evidence: the text alone, on the series shown")
        + (f"; question: {quoted(question.strip())}" if question.strip() else "")
        + (f"; answer: {quoted(answer.strip())}" if answer.strip() else "")
        + f"; a copy kept as derived/{out.name}"
    )
    where = pacs_destination(target) if target else file_destination(out)
    return WritePlan("export_evidence_sr", what, (where,))


@handler(**OPERATOR, writes=plan_evidence_sr)
def export_evidence_sr(
    ctx: RadiologyContext, output_name: NewName, question: Text = "", answer: Text = "",
    evidence_ids: EvidenceIds = None,
) -> HandlerOutput:
    """Write the session's evidence (key slices, points, distances, measurements; or the records numbered) as a
    DICOM measurement report referencing the source images, with the question and answer as its text; a labelled
    finding keeps its lesion's tracking UID; stored to the study's PACS when it came from one."""
    out = output_file(ctx.output_dir, output_name)
    first = _checked_content(ctx, bool(question.strip() or answer.strip()), None, evidence_ids)
    digest = content_digest(first, question, answer)
    check_not_stored(ctx.output_dir, digest, "a measurement report")
    book = _lesion_book(ctx, first.sources)
    sr, content = build_evidence_sr(ctx, output_name, question, answer, book, evidence_ids)
    save_dicom(sr, out)  # owner-only, never through a link
    stored = store_back(ctx.case_inputs.get("origin"), [sr], [out])
    book.save()
    remember(out.parent, digest, out.name)
    lesions = [{"identifier": t["identifier"], "from": t["from"]} for t in content.tracked]
    problems = {"problems": book.problems} if book.problems else {}
    return HandlerOutput({"file": out.name, **content.counts, "lesions": lesions, **problems, **stored})
