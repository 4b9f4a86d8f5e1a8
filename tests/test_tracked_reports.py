"""Measurement reports that follow a patient: a labelled lesion keeps its Tracking Identifier and UID across exports
and sessions of two time points (read back from the earlier session's report), a finding restated is stored once,
the same content is not stored twice, and recorded quantities are NUM items with UCUM units (HU, SUVbw)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import highdicom as hd
import numpy as np
import pydicom
import pytest
from pydicom.uid import generate_uid

from copilot.pacs.sample import write_ct_series
from copilot.runtime import open_session
from copilot.session import Session
from tests.dicom_validator import assert_valid_dicom
from tests.test_suv import write_pet


def _case(folder: Path, write: Any) -> Path:
    """A case pack whose one volume is the DICOM series `write(images)` makes."""
    write(folder / "images" / "ct")
    pack = {"case_id": folder.name, "module": "brain_mri", "inputs": {"volumes": ["images/ct"]}}
    (folder / "case.json").write_text(json.dumps(pack))
    return folder


def _ct(folder: Path) -> None:
    write_ct_series(folder, 4)


def _session(tmp_path: Path, time_point: str, write: Any = _ct) -> Session:
    case = _case(tmp_path / "patient" / time_point, write)
    trace = tmp_path / "sessions" / time_point
    return open_session(case, track="B", trace_dir=trace, allow_store=(str(trace / "derived"),))


def _centre(session: Session) -> list[float]:
    vol = session.scene_data()["volume"]  # type: ignore[index]
    ijk = (np.array(vol.data.shape[::-1]) - 1) / 2.0
    return [round(float(v), 3) for v in vol.ijk_to_ras_point(ijk)]


def _tracked(path: Path) -> dict[str, str]:
    """Tracking Identifier → Tracking UID of each measurement group of a report file (read by highdicom)."""
    report: Any = hd.sr.srread(path).content
    groups = report.get_planar_roi_measurement_groups() + report.get_volumetric_roi_measurement_groups()
    groups += report.get_image_measurement_groups()
    return {g.tracking_identifier: g.tracking_uid for g in groups}


def _export(session: Session, name: str, **args: Any) -> dict[str, Any]:
    out = session.call("export_evidence_sr", {"output_name": name, **args})
    assert out.ok, out.error
    return dict(out.result)


def test_two_time_points_share_the_lesions_tracking_uid(tmp_path: Path) -> None:
    """Session 1 (baseline) records `target 1` and an unlabelled point; session 2 (follow-up, another study of the
    same patient) records `Target  1` again: its report carries the baseline's Tracking UID, read back from the
    baseline session's report; the unlabelled point is each session's own."""
    first = _session(tmp_path, "baseline")
    centre = _centre(first)
    assert first.call("record_point", {"ras": centre, "label": "target 1"}).ok
    assert first.call("record_point", {"ras": [centre[0] + 5, centre[1], centre[2]]}).ok
    result = _export(first, "baseline_report")
    assert result["lesions"] == [{"identifier": "target 1", "from": "new"}, {"identifier": "point 2", "from": "new"}]
    assert first.call("record_point", {"ras": [centre[0], centre[1] + 4, centre[2]], "label": "target 2"}).ok
    again = _export(first, "baseline_report_2")  # the same session, a later question: the same lesions
    assert again["lesions"][:2] == [{"identifier": "target 1", "from": "session"},
                                    {"identifier": "point 2", "from": "session"}]  # fmt: skip
    first.close()
    base = _tracked(tmp_path / "sessions" / "baseline" / "derived" / "baseline_report.dcm")
    assert base == {k: v for k, v in _tracked(tmp_path / "sessions" / "baseline" / "derived"
                                              / "baseline_report_2.dcm").items() if k != "target 2"}  # fmt: skip

    second = _session(tmp_path, "followup")
    assert second.call("record_point", {"ras": centre, "label": "Target  1"}).ok
    assert second.call("record_point", {"ras": [centre[0] + 5, centre[1], centre[2]]}).ok
    result = _export(second, "followup_report")
    second.close()
    assert result["lesions"] == [{"identifier": "target 1", "from": "prior report"},
                                 {"identifier": "point 2", "from": "new"}]  # fmt: skip
    path = tmp_path / "sessions" / "followup" / "derived" / "followup_report.dcm"
    assert_valid_dicom(path)
    follow = _tracked(path)
    assert follow["target 1"] == base["target 1"]
    assert follow["point 2"] != base["point 2"]
    studies = {pydicom.dcmread(p).StudyInstanceUID for p in (tmp_path / "sessions").glob("*/derived/*report.dcm")}
    assert len(studies) == 2  # two studies (time points) of one patient
    book = json.loads((path.parent / "lesions.json").read_text())
    assert "MC-PACS-0042" not in json.dumps(book)  # the book names the patient by a digest only
    assert (path.parent / "lesions.json").stat().st_mode & 0o077 == 0


def test_a_restated_finding_is_one_group_and_the_same_report_is_not_stored_twice(tmp_path: Path) -> None:
    """The same point recorded twice (the answer restating the model's record) is one group; exporting the same
    content again is `already_stored`, naming the file, nothing written; new evidence makes a new report."""
    session = _session(tmp_path, "t1")
    centre = _centre(session)
    assert session.call("record_point", {"ras": centre, "label": "nodule"}).ok
    assert session.call("record_point", {"ras": centre, "label": "answer point 1"}).ok
    result = _export(session, "report", answer="A nodule.")
    assert result["points"] == 1 and result["repeated"] == 1
    refused = session.call("export_evidence_sr", {"output_name": "report_2", "answer": "A nodule."})
    error = refused.error or {}
    assert not refused.ok and error["code"] == "already_stored" and "report.dcm" in error["message"]
    derived = tmp_path / "sessions" / "t1" / "derived"
    assert not (derived / "report_2.dcm").exists()
    assert session.plan_write("export_evidence_sr", {"output_name": "report_2", "answer": "A nodule."}) is None
    assert _export(session, "report_2", answer="A nodule, 2 cm.")["points"] == 1  # other text: another report
    only = _export(session, "report_3", evidence_ids=[2])  # the records of one answer only
    assert only["points"] == 1 and list(_tracked(derived / "report_3.dcm")) == ["point 2: answer point 1"]
    bad = session.call("export_evidence_sr", {"output_name": "report_4", "evidence_ids": [9]})
    assert not bad.ok and (bad.error or {})["code"] == "invalid_arguments"
    session.close()


def _nums(path: Path) -> dict[tuple[str, str], tuple[float, str]]:
    """(name, derivation) → (value, UCUM unit) of every NUM item of a report."""
    found: dict[tuple[str, str], tuple[float, str]] = {}
    pending = list(pydicom.dcmread(path).ContentSequence)
    while pending:
        item = pending.pop()
        pending.extend(getattr(item, "ContentSequence", []))
        if item.ValueType != "NUM":
            continue
        derivation = [c.ConceptCodeSequence[0].CodeMeaning for c in getattr(item, "ContentSequence", [])
                      if c.ConceptNameCodeSequence[0].CodeValue == "121401"]  # fmt: skip
        value = item.MeasuredValueSequence[0]
        found[(item.ConceptNameCodeSequence[0].CodeMeaning, derivation[0] if derivation else "")] = (
            float(value.NumericValue), str(value.MeasurementUnitsCodeSequence[0].CodeValue))
    return found


def test_ct_region_statistics_are_num_items_in_hounsfield_units(tmp_path: Path) -> None:
    """`record_measurement` of a sphere on CT: mean/SD/min/max in `[hnsf'U]` with their SCT derivations and the
    volume in ml, the sphere an SCOORD3D ELLIPSOID; the same numbers region_stats gives; dciodvfy clean."""
    session = _session(tmp_path, "ct")
    centre = _centre(session)
    args = {"shape": "sphere", "center_ras": centre, "radius_mm": 6.0}
    stats = session.call("region_stats", args).result
    assert session.call("record_measurement", {**args, "label": "lesion A"}).ok
    assert session.call("record_measurement", {"shape": "point", "center_ras": centre}).ok
    result = _export(session, "ct_report")
    session.close()
    assert result["measurements"] == 2
    path = tmp_path / "sessions" / "ct" / "derived" / "ct_report.dcm"
    assert_valid_dicom(path)
    nums = _nums(path)
    for stat, meaning in (("mean", "Mean"), ("sd", "Standard Deviation"), ("min", "Minimum"), ("max", "Maximum")):
        assert nums[("Attenuation Coefficient", meaning)] == (pytest.approx(stats[stat], abs=1e-3), "[hnsf'U]")
    assert nums[("Volume", "")] == (pytest.approx(stats["volume_ml"], abs=1e-4), "ml")
    assert nums[("Attenuation Coefficient", "")][1] == "[hnsf'U]"  # the point's value
    report: Any = hd.sr.srread(path).content
    (group,) = report.get_volumetric_roi_measurement_groups()
    surface = group.roi
    assert surface.graphic_type == hd.sr.GraphicTypeValues3D.ELLIPSOID
    lps = np.array(surface.graphic_data)
    assert np.allclose(lps.mean(axis=0), [-centre[0], -centre[1], centre[2]], atol=1e-3)


def test_suvmax_is_a_num_item_in_suvbw(tmp_path: Path) -> None:
    """A PET box around the hot voxel (10000 Bq/ml, 70 kg, 370 MBq injected 10:00, scanned 11:00: SUVbw 2.7634 by
    hand) is stored as SUVbw with derivation Maximum and unit `{SUVbw}g/ml`."""

    def pet(folder: Path) -> None:
        write_pet(folder, 10000.0, ["110000"] * 3, FrameOfReferenceUID=generate_uid(), PatientID="PET-7",
                  PatientName="Test^Pet", StudyDate="20240102", StudyTime="110000")  # fmt: skip

    session = _session(tmp_path, "pet", pet)
    vol = session.scene_data()["volume"]  # type: ignore[index]
    hot = [round(float(v), 3) for v in vol.ijk_to_ras_point(np.array([4.0, 4.0, 1.0]))]
    assert session.call("record_measurement", {"shape": "box", "center_ras": hot, "size_mm": [6, 6, 6],
                                               "label": "hot spot"}).ok  # fmt: skip
    _export(session, "pet_report")
    session.close()
    path = tmp_path / "sessions" / "pet" / "derived" / "pet_report.dcm"
    assert_valid_dicom(path)
    value, unit = _nums(path)[("SUVbw", "Maximum")]
    assert unit == "{SUVbw}g/ml" and value == pytest.approx(10000 * 70000 / (370e6 * 2 ** (-3600 / 6586.2)), abs=1e-3)
