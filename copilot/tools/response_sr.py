"""`export_response_sr`: a RECIST 1.1 or RANO 2.0 response report (TID 1500) of this time point — each lesion's long
and short axes as SCOORD3D polylines with their lengths (NUM, mm; a group for the long axis holding both lengths,
one for the short axis: TID 1410 draws one region per group), its tracked lesion's identifier and UID, the
time point context (TID 1502) — and the response against the patient's earlier reports: sums, changes, category
and the rule that decided it, as the report's Finding text.

Lesions are measured by distances labelled with their name (`copilot.tools.response_measures`); earlier time points
come from the patient's earlier response reports, matched by Tracking UID. The first time point is the baseline.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

import copilot
from copilot.engine.volume.dicom_sources import source_frames
from copilot.errors import HandlerError
from copilot.pacs.store import store_back, store_target
from copilot.tools.dicom_required import complete_sources
from copilot.tools.evidence_sr import OBSERVER_UID
from copilot.tools.operators import OPERATOR, NewName
from copilot.tools.pacs_reports import session_book
from copilot.tools.radiology import handler
from copilot.tools.registry import HandlerOutput, RadiologyContext
from copilot.tools.response_criteria import Assessment, CriteriaError, Lesion, TimePoint, rano, recist
from copilot.tools.response_measures import Measured, earlier_time_points, measured_lesions
from copilot.tools.sr_quantities import ras_to_lps
from copilot.tools.stored import check_not_stored, remember
from copilot.tools.tracking import LesionBook, name_key
from copilot.tools.writes import WritePlan, file_destination, output_file, pacs_destination

Criteria = Annotated[Literal["recist", "rano"], Field(description="'recist' (RECIST 1.1) or 'rano' (RANO 2.0).")]
Names = Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=20)]
NonTargets = Literal["none", "present", "absent", "progressed"]


def _sources(ctx: RadiologyContext, lesions: dict[str, Measured]) -> list[Any]:
    """The source series the lesions were measured on (one DICOM series), refused by name otherwise."""
    vids = {str(r["a"].get("volume_id")) for m in lesions.values() for r in m.records}
    frames = None
    if len(vids) == 1:
        try:
            frames = source_frames(ctx.viewer.volume(vids.pop()))
        except (KeyError, HandlerError):
            frames = None
    if not frames:
        raise HandlerError("invalid_source", "the lesions must be measured on one volume loaded from a DICOM series")
    datasets = list({str(f.dataset.SOPInstanceUID): f.dataset for f in frames}.values())
    complete_sources(datasets, "the measured series")
    return datasets


def _points(earlier: list[Any], now: TimePoint, tracks: dict[str, tuple[str, str, str]],
            nodes: set[str]) -> list[TimePoint]:  # fmt: skip
    """Earlier time points as the criteria read them: the lesions tracked now, found by their Tracking UID and
    named by their Tracking Identifier."""
    points = []
    for point in earlier:
        lesions = tuple(Lesion(name, long_mm=point.lesions[uid][1], short_mm=point.lesions[uid][2],
                               node=key in nodes) for key, (name, uid, _) in tracks.items() if uid in point.lesions)
        points.append(TimePoint(point.label, lesions))
    baseline = {les.name for les in points[0].lesions} if points else set()
    current = tuple(les if les.role != "target" or les.name in baseline or not points else
                    Lesion(les.name, "new", les.long_mm, les.short_mm, les.node) for les in now.lesions)  # fmt: skip
    return [*points, TimePoint(now.label, current, now.steroids, now.steroids_increased, now.clinically_worse)]


def assess(ctx: RadiologyContext, criteria: str, time_point: str, nodes: list[str], new_lesions: list[str],
           non_target: str, clinical: dict[str, bool], book: LesionBook | None = None) -> dict[str, Any]:  # fmt: skip
    """Everything a response report holds: lesions measured now with their tracking, the sources, the time point,
    the earlier time points and the assessment (None at a baseline)."""
    lesions = measured_lesions(ctx.evidence)
    if not lesions:
        raise HandlerError("no_evidence", "no lesion measured: label a distance (long axis, then short axis) with the "
                           "lesion's name")  # fmt: skip
    sources = _sources(ctx, lesions)
    study = str(sources[0].StudyInstanceUID)
    book = book or session_book(ctx, sources[0])
    tracks = {key: book.track(m.name, True) for key, m in lesions.items()}
    label = time_point.strip() or str(sources[0].get("StudyDate") or "this study")
    node_keys, new_keys = {name_key(n) for n in nodes}, {name_key(n) for n in new_lesions}
    current = [Lesion(tracks[key][0], "new" if key in new_keys else "target", m.long_mm, m.short_mm,
                      key in node_keys) for key, m in lesions.items()]  # fmt: skip
    current += [Lesion(n, "new") for n in new_lesions if name_key(n) not in lesions]
    if non_target != "none":
        current.append(Lesion("non-target disease", "non_target", status=non_target))  # type: ignore[arg-type]
    now = TimePoint(label, tuple(current), **clinical)
    earlier = earlier_time_points(book.reports(), study)
    assessment = None
    if earlier:
        try:
            assessment = (recist if criteria == "recist" else rano)(_points(earlier, now, tracks, node_keys))
        except CriteriaError as exc:
            raise HandlerError("invalid_arguments", str(exc)) from exc
    return {"lesions": lesions, "tracks": tracks, "sources": sources, "study": study, "label": label, "book": book,
            "earlier": [p.label for p in earlier], "assessment": assessment}  # fmt: skip


def summary(found: dict[str, Any], criteria: str) -> str:
    """The Finding text: the response with its sums and rule, or that this is the baseline."""
    name = "RECIST 1.1" if criteria == "recist" else "RANO 2.0"
    a: Assessment | None = found["assessment"]
    if a is None:
        return f"{name} baseline at {found['label']}: " + "; ".join(
            f"{m.name} {m.long_mm:.1f}" + (f" × {m.short_mm:.1f}" if m.short_mm else "") + " mm"
            for m in found["lesions"].values())  # fmt: skip
    sums = ", ".join(f"{k} {v:g}" for k, v in a.sums.items())
    return (f"{name} response at {a.time_point}: {a.category}. {a.measure}: {sums}; baseline {a.baseline:g}, nadir "
            f"{a.nadir:g} ({a.nadir_time_point}), change {a.change_from_baseline_pct} % from baseline, "
            f"{a.change_from_nadir_pct} % from the nadir. Rule: {a.rule}."
            + (" To be confirmed by a scan at least 4 weeks later." if a.confirm else ""))  # fmt: skip


def _groups(found: dict[str, Any]) -> list[Any]:
    """One planar ROI group per lesion: its long-axis polyline, Long and Short axis NUMs, the time point."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    frame_of_ref = str(found["sources"][0].FrameOfReferenceUID)

    def line(rec: dict[str, Any]) -> Any:
        return np.array([ras_to_lps(rec["a"]["ras"]), ras_to_lps(rec["b"]["ras"])], dtype=np.float64)

    def group(tracking: Any, rec: dict[str, Any], axes: list[Any]) -> Any:
        return hd.sr.PlanarROIMeasurementsAndQualitativeEvaluations(
            tracking, referenced_region=hd.sr.ImageRegion3D("POLYLINE", line(rec), frame_of_ref),
            time_point_context=hd.sr.TimePointContext(found["label"][:64]), finding_type=codes.DCM.Finding,
            measurements=axes)  # fmt: skip

    groups = []
    for key, m in found["lesions"].items():
        identifier, uid, _ = found["tracks"][key]
        tracking = hd.sr.TrackingIdentifier(uid=uid, identifier=identifier)
        long_axis = hd.sr.Measurement(name=codes.SCT.LongAxis, value=m.long_mm, unit=codes.UCUM.Millimeter)
        if m.short_mm is None:
            groups.append(group(tracking, m.records[0], [long_axis]))
            continue
        short_axis = hd.sr.Measurement(name=codes.SCT.ShortAxis, value=m.short_mm, unit=codes.UCUM.Millimeter)
        groups.append(group(tracking, m.records[0], [long_axis, short_axis]))  # both lengths, the long axis drawn
        groups.append(group(hd.sr.TrackingIdentifier(uid=uid, identifier=identifier), m.records[1], [short_axis]))
    return groups


def build_response_sr(found: dict[str, Any], criteria: str, title: str) -> Any:
    """The Comprehensive 3D SR of one time point's lesions and its response."""
    import highdicom as hd
    from pydicom.sr.codedict import codes
    from pydicom.sr.coding import Code

    device = hd.sr.DeviceObserverIdentifyingAttributes(uid=OBSERVER_UID, name="MedCopilot",
                                                       manufacturer_name="MedCopilot", model_name="MedCopilot")
    context = hd.sr.ObservationContext(observer_device_context=hd.sr.ObserverContext(
        observer_type=codes.DCM.Device, observer_identifying_attributes=device))  # fmt: skip
    report = hd.sr.MeasurementReport(observation_context=context, procedure_reported=codes.SCT.ImagingProcedure,
                                     imaging_measurements=_groups(found), referenced_images=found["sources"])
    texts = hd.sr.ContainerContentItem(name=Code("C0034375", "UMLS", "Qualitative Evaluations"),
                                       relationship_type="CONTAINS", is_content_continuous=False)  # fmt: skip
    texts.ContentSequence = hd.sr.ContentSequence([hd.sr.TextContentItem(
        name=codes.DCM.Finding, value=summary(found, criteria), relationship_type="CONTAINS")])  # fmt: skip
    report[0].ContentSequence.append(texts)
    sr = hd.sr.Comprehensive3DSR(
        evidence=found["sources"], content=report, series_instance_uid=hd.UID(), series_number=902,
        sop_instance_uid=hd.UID(), instance_number=1, manufacturer="MedCopilot", series_description=title[:64],
        institution_name=None, is_complete=True, is_final=False, is_verified=False,
    )  # fmt: skip
    sr.SoftwareVersions = copilot.__version__
    sr.SpecificCharacterSet = "ISO_IR 192"  # UTF-8: the rules' ≥, × and − as written
    return sr


def _digest(found: dict[str, Any], criteria: str) -> str:
    body = [criteria, found["label"], sorted((m.name, m.long_mm, m.short_mm) for m in found["lesions"].values()),
            summary(found, criteria)]  # fmt: skip
    return hashlib.sha256(json.dumps(body, default=str).encode()).hexdigest()


def plan_response_sr(ctx: RadiologyContext, criteria: str, output_name: str, time_point: str = "",
                     nodes: list[str] | None = None, new_lesions: list[str] | None = None, non_target: str = "none",
                     steroids: bool = False, steroids_increased: bool = False,
                     clinically_worse: bool = False) -> WritePlan:  # fmt: skip
    """What `export_response_sr` would write (the response and its lesions) and where, writing nothing."""
    out = output_file(ctx.output_dir, output_name)
    clinical = {"steroids": steroids, "steroids_increased": steroids_increased, "clinically_worse": clinically_worse}
    found = assess(ctx, criteria, time_point, nodes or [], new_lesions or [], non_target, clinical)
    check_not_stored(ctx.output_dir, _digest(found, criteria), "a response report")
    target = store_target(ctx.case_inputs.get("origin"), [found["study"]])
    what = (f"DICOM response report (Comprehensive 3D SR) {output_name!r} of study {found['study']}: "
            f"{summary(found, criteria)}; a copy kept as derived/{out.name}")  # fmt: skip
    return WritePlan("export_response_sr", what, (pacs_destination(target) if target else file_destination(out),))


@handler(**OPERATOR, writes=plan_response_sr)
def export_response_sr(
    ctx: RadiologyContext,
    criteria: Criteria,
    output_name: NewName,
    time_point: Annotated[str, Field(max_length=64, description="This time point's name ('': the study date).")] = "",
    nodes: Annotated[Names | None, Field(description="Lesions that are lymph nodes (RECIST: short axis).")] = None,
    new_lesions: Annotated[Names | None, Field(description="Lesions new at this time point.")] = None,
    non_target: Annotated[NonTargets, Field(description="Non-target disease at this time point.")] = "none",
    steroids: Annotated[bool, Field(description="RANO: corticosteroids beyond physiological doses.")] = False,
    steroids_increased: Annotated[bool, Field(description="RANO: corticosteroids increased.")] = False,
    clinically_worse: Annotated[bool, Field(description="RANO: clinical deterioration.")] = False,
) -> HandlerOutput:
    """Write this time point's lesions (distances labelled with each lesion's name: long, then short axis) and the
    RECIST 1.1 or RANO 2.0 response against the patient's earlier response reports as a DICOM report."""
    out = output_file(ctx.output_dir, output_name)
    clinical = {"steroids": steroids, "steroids_increased": steroids_increased, "clinically_worse": clinically_worse}
    found = assess(ctx, criteria, time_point, nodes or [], new_lesions or [], non_target, clinical)
    digest = _digest(found, criteria)
    check_not_stored(ctx.output_dir, digest, "a response report")
    sr = build_response_sr(found, criteria, output_name)
    out.parent.mkdir(parents=True, exist_ok=True)
    sr.save_as(out)
    stored = store_back(ctx.case_inputs.get("origin"), [sr], [out])
    found["book"].save()
    remember(out.parent, digest, out.name)
    a: Assessment | None = found["assessment"]
    result: dict[str, Any] = {"file": out.name, "time_point": found["label"], "earlier": found["earlier"],
                              "category": a.category if a else "baseline", "rule": a.rule if a else "",
                              "sums": a.sums if a else {}, **stored}  # fmt: skip
    return HandlerOutput(result)
