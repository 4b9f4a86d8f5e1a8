"""Every spelling of the open study's identifiers is caught: umlauts spelt out or dropped, NFD and full-width forms,
look-alike letters of other scripts, invisible characters, names joined, IDs and accessions with separators
anywhere, dates as words, ordinals and two-digit years — of the open exam and of the patient's other exams in the
PACS cache. None of them reaches a recorded request of a `chat`; ordinary text (numbers, common words) stays."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pydicom
import pytest

from copilot.cli import main
from copilot.panel.folding import fold
from copilot.panel.identifiers import study_identifiers
from copilot.study.privacy import Redactor
from tests.fake_openai import FakeOpenAI
from tests.workstation_data import write_dicom_series

TAGS = {"PatientName": "MÜLLER^HANS", "PatientID": "PAT-4471-0932", "PatientBirthDate": "19610303",
        "AccessionNumber": "A24-88317", "StudyDate": "20240812", "SpecificCharacterSet": "ISO_IR 192"}  # fmt: skip
NAME = ["Mueller", "Muller", "MUELLER", "mu\u0308ller", "ＭＵＬＬＥＲ", "\u041cüller", "Mu\u0435ll\u0435r",
        "Mül\u200bler", "HansMüller", "MüllerHans", "Hans-Mueller", "HANS MULLER", "Müller, Hans",
        "hansmuller"]  # fmt: skip
BIRTH = ["third of March 1961", "03-Mar-61", "March 3rd, 61", "3.3.61", "3rd of march '61", "March the third 1961",
         "1961 March 3", "03/03/61", "３ March １９６１"]  # fmt: skip
IDS = ["PAT 4471 0932", "PAT-44710932", "pat44710932", "PAT 447 10932", "\u0420\u0410\u0422-4471-0932",
       "ＰＡＴ４４７１０９３２", "A24 88317", "A-24-88317", "a2488317", "A24 883 17"]  # fmt: skip
STUDY = ["twelfth of August 2024", "Aug 12 '24", "12-Aug-24", "12.8.24", "August 12th, 2024"]
OTHER_EXAM = ["2023-01-15", "15 January 2023", "fifteenth of Jan 2023", "15/1/23", "20230115"]
SPELLINGS = NAME + BIRTH + IDS + STUDY + OTHER_EXAM
KEPT = ("The lesion measures 33.61 mm, 44.71 mm, 12.5 mm and 2024 cc at slice 3; compare the march of the "
        "disease, a hanseatic pattern, 15 of 23 nodes, offset 883.17.")  # fmt: skip


def tag(folder: Path, tags: dict[str, str]) -> None:
    for f in folder.iterdir():
        ds = pydicom.dcmread(f)
        for key, value in tags.items():
            setattr(ds, key, value)
        ds.save_as(f)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("spell")
    folder = base / "series"
    data = np.zeros((4, 16, 16), dtype=np.int16)
    data[1:3, 4:12, 4:12] = 400
    write_dicom_series(folder, data, "2.25.99887766554433", "T1 axial", 2)
    tag(folder, TAGS)
    earlier = base / "cache" / "0123456789abcdef" / "fedcba9876543210" / "00aa11bb22cc33dd"  # SERVER/STUDY/SERIES
    write_dicom_series(earlier, data, "2.25.11223344", "CT", 1)
    tag(earlier, {"PatientID": "PAT44710932", "StudyDate": "20230115", "PatientName": "MUELLER^HANS"})
    (earlier / "origin.json").write_text(json.dumps({"dicomweb": "http://pacs.invalid/dicom-web"}))
    return folder


@pytest.fixture(autouse=True)
def cache(study: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDCOPILOT_PACS_CACHE", str(study.parent / "cache"))


def test_count_of_spellings() -> None:
    assert len(SPELLINGS) == 43 and len(set(SPELLINGS)) == 43


def test_every_spelling_is_removed_and_ordinary_text_stays(study: Path) -> None:
    redactor = Redactor(study_identifiers(study, {"volumes": ["."]}, "radiology"))
    missed = [s for s in SPELLINGS if redactor.text(f"Compare with {s} please.") != "Compare with [redacted] please."]
    assert missed == []
    assert redactor.text(KEPT) == KEPT
    assert redactor.found_in("Is HansMüller's scan of 03-Mar-61 new?") == ["03-Mar-61", "HansMüller"]


def test_another_patients_exam_dates_are_not_added(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDCOPILOT_PACS_CACHE", str(tmp_path / "empty"))
    redactor = Redactor(study_identifiers(study, {"volumes": ["."]}, "radiology"))
    assert redactor.text("as on 2023-01-15") == "as on 2023-01-15"  # only this patient's cached exams count
    assert redactor.text("as on 2024-08-12") == "as on [redacted]"


def test_no_spelling_typed_into_chat_reaches_a_request(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = [" and ".join(SPELLINGS[n : n + 11]) + ": anything new?" for n in range(0, len(SPELLINGS), 11)]
    fake = FakeOpenAI([{"content": "Nothing new is seen."}])
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    try:
        args = ["chat", str(study), "--base-url", fake.base_url, "--trace-dir", str(tmp_path / "trace")]
        rc = main(args + [a for q in questions for a in ("--ask", q)])
    finally:
        fake.stop()
    assert rc == 0 and len(fake.requests) == len(questions)
    sent = "\n".join(json.dumps(json.loads(body), ensure_ascii=False) for body in fake.bodies)
    assert [s for s in SPELLINGS if s in sent] == []
    folded = fold(sent)
    assert [s for s in ("mueller", "muller", "4471", "88317", "1961", "third of march") if s in folded] == []
    assert capsys.readouterr().err.count("removed from your question before it was sent") == len(questions)


def test_a_series_description_naming_the_patient_is_neither_drawn_nor_sent(tmp_path: Path) -> None:
    from copilot.panel.studies import open_study, study_for
    from copilot.study.privacy import check_images

    folder = tmp_path / "named"
    data = np.zeros((4, 16, 16), dtype=np.int16)
    write_dicom_series(folder, data, "2.25.4455", "x", 7)
    tag(folder, {**TAGS, "SeriesDescription": "Mueller Hans CT thorax"})
    session = open_study(study_for(str(folder)), tmp_path / "trace")
    try:
        [volume] = session.snapshot()["volumes"]
        assert volume["name"] == "Series 7"  # not the description holding the patient's name
        check_images(session, Redactor(study_identifiers(folder, {"volumes": ["."]}, "radiology")))  # not refused
    finally:
        session.close({"status": "test"})


def test_what_goes_to_a_model_names_no_path_of_this_machine_nor_any_uid(study: Path) -> None:
    from copilot.study.policies import redactor_for

    class Case:
        root, inputs = study, {"volumes": ["."]}

    redactor = redactor_for(Case(), "radiology")
    said = redactor.text("cannot open /srv/pacs/cache/ab12/cd34/00001.dcm; stored SEG 2.25.123456789012345 on "
                         "https://pacs.example.org/dicom-web, offset 12.5 mm, T1/T2")  # fmt: skip
    assert said == "cannot open [path]; stored SEG [uid] on https://pacs.example.org/dicom-web, offset 12.5 mm, T1/T2"
