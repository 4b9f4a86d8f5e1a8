"""`export_key_images`: the session's key slices as a DICOM Key Object Selection document (KOS, TID 2000, title
"Of Interest") referencing each key slice's source instance, with the clinician's note as its Key Object
Description; stored back to the PACS the study came from (STOW-RS) or written as a file. PACS viewers list a KOS
with the study and open its images as the study's key images.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

import numpy as np
import pydicom
from pydantic import Field

import copilot
from copilot.engine.volume.dicom_sources import source_frames
from copilot.errors import HandlerError
from copilot.pacs.store import store_back, store_target
from copilot.tools.dicom_required import complete_sources
from copilot.tools.evidence_sr import OBSERVER_UID, EvidenceIds
from copilot.tools.operators import OPERATOR, NewName
from copilot.tools.radiology import handler
from copilot.tools.registry import HandlerOutput, RadiologyContext
from copilot.tools.stored import check_not_stored, remember
from copilot.tools.writes import WritePlan, file_destination, output_file, pacs_destination

Note = Annotated[str, Field(max_length=1024, description="The note the key images carry ('' for none).")]
OF_INTEREST = ("113000", "DCM", "Of Interest")


def key_images(ctx: RadiologyContext, evidence_ids: list[int] | None) -> tuple[list[pydicom.Dataset], list[str]]:
    """The source instance of each key slice (the numbered ones, else all; each instance once) and their labels."""
    wanted = set(evidence_ids) if evidence_ids is not None else None
    found: dict[str, pydicom.Dataset] = {}
    labels: list[str] = []
    for rec in ctx.evidence:
        if rec.get("kind") != "key_slice" or (wanted is not None and int(rec.get("evidence_id") or 0) not in wanted):
            continue
        try:
            series = source_frames(ctx.viewer.volume(str(rec.get("volume_id"))))
        except (KeyError, HandlerError):
            series = None
        if not series:
            continue
        k = int(np.clip(np.rint(rec["ijk_at_view_centre"][2]), 0, len(series) - 1))
        found.setdefault(str(series[k].dataset.SOPInstanceUID), series[k].dataset)
        labels.append(str(rec.get("label") or f"key slice {rec['evidence_id']}"))
    if not found:
        raise HandlerError("no_evidence", "no key slice on a DICOM series to mark as a key image yet")
    images = list(found.values())
    complete_sources(images, "the key images")
    if len({str(ds.StudyInstanceUID) for ds in images}) > 1:
        raise HandlerError("several_studies", "the key slices lie on series of several studies; one document each")
    return images, labels


def build_kos(images: list[pydicom.Dataset], note: str, title: str) -> Any:
    """The Key Object Selection document referencing `images`, MedCopilot as its observer device."""
    import highdicom as hd
    from pydicom.sr.codedict import codes
    from pydicom.sr.coding import Code

    device = hd.sr.ObserverContext(
        observer_type=codes.DCM.Device,
        observer_identifying_attributes=hd.sr.DeviceObserverIdentifyingAttributes(uid=OBSERVER_UID, name="MedCopilot"),
    )
    content = hd.ko.KeyObjectSelection(Code(*OF_INTEREST), images, observer_device_context=device,
                                       description=note.strip() or None)  # fmt: skip
    kos = hd.ko.KeyObjectSelectionDocument(
        evidence=images, content=content, series_instance_uid=hd.UID(), series_number=903, sop_instance_uid=hd.UID(),
        instance_number=1, manufacturer="MedCopilot", institution_name=None,
    )  # fmt: skip
    kos.SeriesDescription = title[:64]
    kos.SoftwareVersions = copilot.__version__
    kos.SpecificCharacterSet = "ISO_IR 192"  # UTF-8: the note as written
    return kos


def _digest(images: list[pydicom.Dataset], note: str) -> str:
    body = [sorted(str(ds.SOPInstanceUID) for ds in images), note.strip()]
    return hashlib.sha256(json.dumps(["kos", *body]).encode()).hexdigest()


def plan_key_images(
    ctx: RadiologyContext, output_name: str, note: str = "", evidence_ids: list[int] | None = None
) -> WritePlan:
    """What `export_key_images` would write (which key images, the note) and where, writing nothing."""
    out = output_file(ctx.output_dir, output_name)
    images, labels = key_images(ctx, evidence_ids)
    check_not_stored(ctx.output_dir, _digest(images, note), "a key object selection")
    study = str(images[0].StudyInstanceUID)
    target = store_target(ctx.case_inputs.get("origin"), [study])
    what = (f"DICOM key object selection (KOS) {output_name!r} of study {study}: {len(images)} key image(s) "
            f"({'; '.join(labels)})" + (f"; note: «{note.strip()}»" if note.strip() else "")
            + f"; a copy kept as derived/{out.name}")  # fmt: skip
    return WritePlan("export_key_images", what, (pacs_destination(target) if target else file_destination(out),))


@handler(**OPERATOR, writes=plan_key_images)
def export_key_images(
    ctx: RadiologyContext, output_name: NewName, note: Note = "", evidence_ids: EvidenceIds = None
) -> HandlerOutput:
    """Mark the images of the session's key slices (or the numbered ones) as the study's key images: a DICOM Key
    Object Selection with the note, stored to the study's PACS when it came from one."""
    out = output_file(ctx.output_dir, output_name)
    images, _ = key_images(ctx, evidence_ids)
    digest = _digest(images, note)
    check_not_stored(ctx.output_dir, digest, "a key object selection")
    kos = build_kos(images, note, output_name)
    out.parent.mkdir(parents=True, exist_ok=True)
    kos.save_as(out)
    stored = store_back(ctx.case_inputs.get("origin"), [kos], [out])
    remember(out.parent, digest, out.name)
    return HandlerOutput({"file": out.name, "key_images": len(images), **stored})
