"""The patient banner: whose study is open, read from its DICOM headers, shown to the clinician (`chat`'s header,
the session report, window title) and absent from every request to the model; a store back to the PACS refused
when the object refers to another study than the one the banner shows."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pydicom
import pytest

from copilot.errors import HandlerError
from copilot.pacs.orthanc import LocalOrthanc, missing
from copilot.pacs.patient import age_on, person_name, stored_age
from copilot.pacs.sample import write_ct_series
from copilot.pacs.store import store_back
from copilot.panel.banner import banner_from_facts, study_banner
from copilot.panel.studies import study_for
from copilot.replay import read_events

PATIENT = {
    "PatientName": "Brackwater^Henrietta^Q", "PatientID": "HX-558201", "PatientBirthDate": "19610314",
    "PatientSex": "F", "AccessionNumber": "ACC-99172", "InstitutionName": "Saint Quillon Infirmary",
    "StudyDescription": "Thorax staging", "StudyDate": "20240611",
}  # fmt: skip


def dicom_study(folder: Path, **extra: str) -> list[pydicom.Dataset]:
    """The sample CT series rewritten with a full set of patient and study headers."""
    datasets = write_ct_series(folder)
    for path, ds in zip(sorted(folder.iterdir()), datasets, strict=True):
        for key, value in {**PATIENT, **extra}.items():
            setattr(ds, key, value)
        ds.save_as(path)
    return datasets


def test_person_names_dates_and_ages_as_a_clinician_reads_them() -> None:
    assert person_name("Brackwater^Henrietta^Q") == "Brackwater, Henrietta Q"
    assert person_name("DOE^JOHN^^DR^JR") == "DR DOE, JOHN JR"
    assert person_name("Anonymous") == "Anonymous" and person_name("^Given") == "Given"
    assert person_name("Yamada^Tarou=山田^太郎") == "Yamada, Tarou"  # the alphabetic group
    assert age_on("19610314", "20240611") == "63 y" and age_on("19610614", "20240611") == "62 y"
    assert age_on("bad", "20240611") == "" and stored_age("063Y") == "63 y" and stored_age("014M") == "14 mo"


def test_banner_of_a_dicom_folder_holds_whatever_the_headers_say(tmp_path: Path) -> None:
    dicom_study(tmp_path / "ct")
    banner = study_banner(study_for(tmp_path / "ct"))
    assert banner.patient == "Brackwater, Henrietta Q"
    assert banner.fields == [
        ("ID", "HX-558201"), ("Born", "1961-03-14 (63 y)"), ("Sex", "female"), ("Study", "2024-06-11 Thorax staging"),
        ("Acc", "ACC-99172"), ("Modality", "CT"), ("Institution", "Saint Quillon Infirmary"),
    ]  # fmt: skip
    assert banner.title == "MedCopilot — Brackwater, Henrietta Q — Thorax staging 2024-06-11 — #3 chest axial"
    assert banner.line.startswith("Brackwater, Henrietta Q · ID HX-558201 · Born 1961-03-14 (63 y)")
    # a series without birth date, sex or institution: only what is there, the stored age instead
    sparse = tmp_path / "sparse"
    datasets = write_ct_series(sparse)
    for path, ds in zip(sorted(sparse.iterdir()), datasets, strict=True):
        for key in ("PatientBirthDate", "PatientSex", "InstitutionName", "StudyDescription"):
            if key in ds:
                delattr(ds, key)
        ds.PatientAge = "041Y"
        ds.save_as(path)
    fields = dict(study_banner(study_for(sparse)).fields)
    assert fields["Age"] == "41 y" and "Sex" not in fields and "Institution" not in fields
    assert fields["Study"] == "2024-06-11"


def test_a_study_without_headers_says_so_and_is_named_by_its_file() -> None:
    banner = banner_from_facts(None, "patient_t2.nii.gz")
    assert banner.patient == "" and banner.line.startswith("no patient details")
    assert banner.title == "MedCopilot — patient_t2.nii.gz"


def test_chat_prints_the_banner_once_and_no_request_carries_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`chat` on a DICOM folder: the banner is the terminal's header, and none of its strings (name in every
    spelling it shows, ID, birth date, study, accession, institution) is in any recorded request body."""
    from copilot.cli import main
    from tests.fake_openai import FakeOpenAI, tool

    dicom_study(tmp_path / "ct")
    banner = study_banner(study_for(tmp_path / "ct"))
    fake = FakeOpenAI([
        {"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": 15.0})]},
        {"tool_calls": [tool("record_key_slice", {"view": "red", "label": "block"})]},
        {"content": "A bright block lies in the slice shown.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: 15.0"},
    ])  # fmt: skip
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)  # the banner is for a terminal only
    try:
        rc = main(["chat", str(tmp_path / "ct"), "--ask", "Is there a bright structure?", "--ask", "Where exactly?",
                   "--base-url", fake.base_url, "--trace-dir", str(tmp_path / "t")])  # fmt: skip
    finally:
        fake.stop()
    captured = capsys.readouterr()
    out = captured.out
    assert rc == 0, captured.err
    assert out.count(f"patient: {banner.line}") == 1
    assert out.index("patient: ") < out.index("answer: ")
    shown = [s for s in banner.strings() if s not in ("CT", "female")]  # modality and sex are no identifiers
    shown += [banner.patient.replace(",", ""), "Brackwater", "Henrietta", "1961-03-14", "2024-06-11"]
    assert len(fake.bodies) >= 2
    leaks = [s for body in fake.bodies for s in shown if s.lower() in body.decode("utf-8").lower()]
    assert leaks == []
    report = (tmp_path / "t" / "report.html").read_text(encoding="utf-8")
    assert 'class="patient-banner"' in report and "HX-558201" in report
    ref = json.loads((tmp_path / "t" / "trace.jsonl").read_text().split("\n", 1)[0])["study_ref"]
    assert f"The trace names this study <code>{ref}</code>" in report  # the sidecar, shown to the clinician


def _sr_like(study: str, series: str, frame: str) -> pydicom.Dataset:
    """The parts of an evidence report that say which study, series and frame of reference it refers to."""
    ds = pydicom.Dataset()
    ds.StudyInstanceUID = study
    ref_series = pydicom.Dataset()
    ref_series.SeriesInstanceUID = series
    ref_study = pydicom.Dataset()
    ref_study.StudyInstanceUID = study
    ref_study.ReferencedSeriesSequence = [ref_series]
    ds.CurrentRequestedProcedureEvidenceSequence = [ref_study]
    point = pydicom.Dataset()
    point.ReferencedFrameOfReferenceUID = frame
    group = pydicom.Dataset()
    group.ContentSequence = [point]
    ds.ContentSequence = [group]
    return ds


@pytest.mark.parametrize(
    ("which", "problem"),
    [("study", "another study"), ("series", "a series that is not of the study open"),
     ("frame", "frame of reference is not that of the study open")],
)  # fmt: skip
def test_a_store_on_another_study_than_the_banner_shows_is_refused(tmp_path: Path, which: str, problem: str) -> None:
    """Refused by name before the PACS is contacted (its URL leads nowhere), the written file removed."""
    shown = {"study": "1.2.3", "series": ["1.2.3.4"], "frames": ["1.2.3.9"]}
    origin: dict[str, Any] = {"dicomweb": "http://127.0.0.1:9/dicom-web", "study": "1.2.3", "shown": shown}
    uids = {"study": "1.2.3", "series": "1.2.3.4", "frame": "1.2.3.9"} | {which: "9.9.9"}
    ds = _sr_like(uids["study"], uids["series"], uids["frame"])
    written = tmp_path / "derived" / "report.dcm"
    written.parent.mkdir()
    written.write_bytes(b"x")
    with pytest.raises(HandlerError) as err:
        store_back(origin, [ds], [written])
    assert err.value.code == "wrong_study" and problem in str(err.value) and "9.9.9" not in str(err.value)
    assert not written.exists()


@pytest.mark.slow  # a private Orthanc
@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_an_export_on_a_series_of_another_study_is_never_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PACS study open, a series of another patient's study found in its folder (a foreign copy) imported and
    reported on: the export is refused as `wrong_study`, nothing reaches the PACS, the refusal is traced."""
    from copilot.pacs.client import PacsClient
    from copilot.panel.studies import open_study, study_at
    from tests.test_privacy_on_disk import _export

    monkeypatch.setenv("MEDCOPILOT_PACS_CACHE", str(tmp_path / "cache"))
    shown = dicom_study(tmp_path / "shown")
    write_ct_series(tmp_path / "foreign")  # the sample patient's own study
    with LocalOrthanc() as pacs:
        monkeypatch.setenv("MEDCOPILOT_PACS_USER", pacs.user)
        monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", pacs.password)
        client = PacsClient(pacs.dicomweb)
        client.store(shown, str(shown[0].StudyInstanceUID))
        session = open_study(study_at(f"{pacs.dicomweb}/studies/{shown[0].StudyInstanceUID}"), tmp_path / "t",
                             track="B")  # fmt: skip
        shutil.copytree(tmp_path / "foreign", Path(session.case.root) / "foreign")
        imported = session.call("import_dicom", {"path": "foreign"}, actor="clinician")
        assert imported.ok, imported.error
        vid = imported.result["imported"][0]["id"]
        assert session.call("select_volume", {"volume_id": vid}, actor="clinician").ok
        assert session.call("record_key_slice", {"view": "red", "label": "block"}, actor="clinician").ok
        refused = _export(session, "export_evidence_sr", {"output_name": "evidence"})
        assert not refused.ok and refused.error["code"] == "wrong_study"
        assert "another study than the one open" in refused.error["message"]
        assert [s["modality"] for s in client.series(str(shown[0].StudyInstanceUID))] == ["CT"]  # nothing stored
        assert not (tmp_path / "t" / "derived" / "evidence.dcm").exists()
        session.close()
    events = read_events(tmp_path / "t")[0]
    assert any(e.get("handler") == "export_evidence_sr" and e.get("error", {}).get("code") == "wrong_study"
               for e in events)  # fmt: skip


def test_chat_keeps_the_banner_off_a_redirected_standard_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from copilot.cli import main
    from tests.fake_openai import FakeOpenAI

    dicom_study(tmp_path / "ct")
    banner = study_banner(study_for(tmp_path / "ct"))
    fake = FakeOpenAI([{"content": "Nothing."}])
    try:
        rc = main(["chat", str(tmp_path / "ct"), "--ask", "Anything?", "--base-url", fake.base_url,
                   "--trace-dir", str(tmp_path / "t")])  # fmt: skip
    finally:
        fake.stop()
    captured = capsys.readouterr()
    assert rc == 0 and "patient: " not in captured.out and banner.patient not in captured.out + captured.err
    assert "patient: shown at a terminal only" in captured.err
