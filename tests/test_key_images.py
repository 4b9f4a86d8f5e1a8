"""Key images as a DICOM Key Object Selection: two key slices become a KOS (TID 2000, "Of Interest") referencing
exactly their source instances with the note, valid for dciodvfy and read back by highdicom; the same selection is
not stored twice."""

from __future__ import annotations

from pathlib import Path

import highdicom as hd
import pydicom

from tests.dicom_validator import assert_valid_dicom
from tests.test_tracked_reports import _session


def test_key_slices_become_a_key_object_selection(tmp_path: Path) -> None:
    session = _session(tmp_path, "kos")
    slices = sorted((tmp_path / "patient" / "kos" / "images" / "ct").glob("*.dcm"))
    by_z = {float(pydicom.dcmread(p).ImagePositionPatient[2]): str(pydicom.dcmread(p).SOPInstanceUID) for p in slices}
    for z in (12.5, 15.0):  # RAS S = LPS z for an axial series
        assert session.call("record_key_slice", {"view": "red", "offset": z, "label": f"level {z}"}).ok
    plan = session.plan_write("export_key_images", {"output_name": "key", "note": "Nodule → compare"})
    assert plan is not None and "2 key image(s) (level 12.5; level 15.0)" in plan.what
    out = session.call("export_key_images", {"output_name": "key", "note": "Nodule → compare"})
    assert out.ok and out.result["key_images"] == 2, out.error
    again = session.call("export_key_images", {"output_name": "key_2", "note": "Nodule → compare"})
    only = session.call("export_key_images", {"output_name": "key_3", "evidence_ids": [1]})
    session.close()
    assert not again.ok and (again.error or {})["code"] == "already_stored"
    path = tmp_path / "sessions" / "kos" / "derived" / "key.dcm"
    assert_valid_dicom(path)
    kos = hd.ko.KeyObjectSelectionDocument.from_dataset(pydicom.dcmread(path))
    assert kos.Modality == "KO" and kos.SeriesDescription == "key"
    referenced = {str(ref.ReferencedSOPSequence[0].ReferencedSOPInstanceUID) for ref in kos.content.get_references()}
    assert referenced == {by_z[12.5], by_z[15.0]}
    title = kos.ConceptNameCodeSequence[0]
    assert title.CodeValue == "113000" and title.CodeMeaning == "Of Interest"
    texts = [i.TextValue for i in kos.ContentSequence if i.ConceptNameCodeSequence[0].CodeValue == "113012"]
    assert texts == ["Nodule → compare"]
    assert only.ok and only.result["key_images"] == 1
