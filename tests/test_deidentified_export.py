"""`sessions export --deidentify` carries the session's DICOM exports de-identified as DICOM PS3.15's Basic
Application Confidentiality Profile with the Clean Descriptors Option, declared in the De-identification Method
Code Sequence: no identifier of the study left in them, UIDs replaced alike across the objects, the record of PACS
stores left out."""

from __future__ import annotations

import json
from pathlib import Path

import pydicom
import pytest
from pydicom.dataset import Dataset
from pydicom.sequence import Sequence

from copilot.panel.studies import open_study, study_for
from copilot.study.deidentify import UidMap, deidentify
from copilot.study.sessions import export_session
from tests.test_patient_banner import PATIENT, dicom_study


def _text_item(text: str) -> Dataset:
    item = Dataset()
    item.ValueType, item.TextValue = "TEXT", text
    return item


def test_the_profile_empties_removes_replaces_and_declares() -> None:
    ds = Dataset()
    for key, value in PATIENT.items():
        setattr(ds, key, value)
    ds.SOPClassUID, ds.SOPInstanceUID, ds.StudyInstanceUID = "1.2.840.10008.5.1.4.1.1.66.4", "2.25.1234567", "2.25.99"
    ds.OperatorsName, ds.SeriesDate = "QUIX^ANNA", "20240611"
    ds.ContentSequence = Sequence([_text_item("for HX-558201")])
    ds.add_new(0x00091001, "LO", "private note Brackwater")
    uids = UidMap()
    deidentify(ds, uids, lambda text: text.replace("HX-558201", "[redacted]"))
    assert ds.PatientName == "" and ds.PatientID == "" and ds.PatientBirthDate == "" and ds.StudyDate == ""
    assert "InstitutionName" not in ds and "OperatorsName" not in ds and "SeriesDate" not in ds
    assert "StudyDescription" not in ds and (0x0009, 0x1001) not in ds
    assert ds.SOPClassUID == "1.2.840.10008.5.1.4.1.1.66.4"  # the standard's own UIDs stay
    assert ds.SOPInstanceUID == uids("2.25.1234567") != "2.25.1234567"
    assert ds.ContentSequence[0].TextValue == "for [redacted]"
    assert ds.PatientIdentityRemoved == "YES" and ds.LongitudinalTemporalInformationModified == "REMOVED"
    assert [c.CodeValue for c in ds.DeidentificationMethodCodeSequence] == ["113100", "113105"]
    assert all(c.CodingSchemeDesignator == "DCM" for c in ds.DeidentificationMethodCodeSequence)


def test_an_export_carries_its_dicom_exports_deidentified(tmp_path: Path) -> None:
    study = tmp_path / "Brackwater_Henrietta" / "ct"
    datasets = dicom_study(study)
    session = open_study(study_for(study), tmp_path / "session")
    session.close({"status": "test"})
    derived = tmp_path / "session" / "derived"
    derived.mkdir()
    source = pydicom.dcmread(sorted(study.iterdir())[0])
    sr = source.copy()
    sr.SOPInstanceUID = "2.25.55501"
    sr.ContentSequence = Sequence([_text_item("Brackwater, Henrietta: nodule")])
    ref = Dataset()
    ref.ReferencedSOPInstanceUID = source.SOPInstanceUID
    sr.ReferencedImageSequence = Sequence([ref])
    sr.save_as(derived / "Brackwater_report.dcm")
    source.save_as(derived / "segment.dcm")
    (derived / "stored.json").write_text(json.dumps({"url": "http://pacs/dicom-web", "uid": source.SOPInstanceUID}))
    out = tmp_path / "shared"
    left = export_session(tmp_path / "session", out, deidentify=True)
    assert "derived/stored.json" in left and not (out / "derived" / "stored.json").exists()
    files = sorted((out / "derived").iterdir())
    assert [f.name for f in files] == ["redacted_report.dcm", "segment.dcm"]
    copies = [pydicom.dcmread(f) for f in files]
    everything = "\n".join(str(ds) + str(ds.file_meta) for ds in copies)
    for secret in ("Brackwater", "Henrietta", "HX-558201", "19610314", "ACC-99172", "Saint Quillon", "20240611",
                   datasets[0].StudyInstanceUID, datasets[0].SeriesInstanceUID, source.SOPInstanceUID):  # fmt: skip
        assert secret not in everything, secret
    report, segment = copies
    assert report.ReferencedImageSequence[0].ReferencedSOPInstanceUID == segment.SOPInstanceUID  # references hold
    assert report.StudyInstanceUID == segment.StudyInstanceUID and report.file_meta.MediaStorageSOPInstanceUID == \
        report.SOPInstanceUID  # fmt: skip
    assert all(ds.DeidentificationMethodCodeSequence[0].CodeValue == "113100" for ds in copies)


def test_an_export_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        export_session(tmp_path, tmp_path / "out", deidentify=True)


def test_a_deidentified_copy_replays_with_the_study_folder_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from copilot.cli import main
    from tests.fake_openai import FakeOpenAI, tool

    study = tmp_path / "Brackwater_Henrietta" / "ct"
    dicom_study(study)
    fake = FakeOpenAI([{"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": 15.0})]},
                       {"content": "Done."}])  # fmt: skip
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    try:
        assert main(["chat", str(study), "--ask", "Where?", "--base-url", fake.base_url,
                     "--trace-dir", str(tmp_path / "t")]) == 0  # fmt: skip
    finally:
        fake.stop()
    assert main(["sessions", "export", str(tmp_path / "t"), str(tmp_path / "copy"), "--deidentify"]) == 0
    text = (tmp_path / "copy" / "trace.jsonl").read_text()
    assert "Brackwater" not in text and str(tmp_path) not in text
    capsys.readouterr()
    assert main(["replay", str(tmp_path / "copy")]) == 1 and "give the study folder (--case)" in capsys.readouterr().out
    assert main(["replay", str(tmp_path / "copy"), "--case", str(study)]) == 0
    assert "handler calls reproduced" in capsys.readouterr().out
