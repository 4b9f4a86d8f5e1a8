"""Identifiers the clinician types are scrubbed wholly: 50 spellings of the open study's name words, institution
words, IDs and dates (in the common formats) typed into questions reach no recorded model request, the clinician
is told what was removed, and common words (also those of institution names) are left in the question."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pydicom
import pytest

from copilot.cli import main
from copilot.panel.identifiers import study_identifiers
from copilot.study.privacy import Redactor
from tests.fake_openai import FakeOpenAI
from tests.workstation_data import write_dicom_series

TAGS = {
    "PatientName": "QUIXLEY^JOHNATHAN", "PatientID": "MRN-7734921", "PatientBirthDate": "19581123",
    "AccessionNumber": "ACC20240917X", "InstitutionName": "Brackenridge Memorial Hospital",
    "ReferringPhysicianName": "HOUSEMAN^GREGORIO", "StudyDate": "20240917",
}  # fmt: skip
NAMES = ["Quixley", "quixley", "QUIXLEY", "Johnathan", "johnathan quixley", "Quixley, Johnathan", "Mr. Quixley's",
         "QUIXLEY^JOHNATHAN", "Dr Houseman", "Gregorio"]  # fmt: skip
INSTITUTION = ["Brackenridge", "brackenridge", "BRACKENRIDGE MEMORIAL", "Brackenridge Memorial Hospital"]
IDS = ["MRN-7734921", "mrn-7734921", "7734921", "MRN 7734921", "mrn7734921", "ACC20240917X", "acc20240917x"]
BIRTH = ["19581123", "1958-11-23", "23/11/1958", "11/23/1958", "23.11.1958", "23 November 1958", "November 23, 1958",
         "Nov 23, 1958", "Nov. 23 1958", "23 Nov 1958", "23rd November 1958", "1958/11/23", "11-23-1958",
         "23-11-1958", "23.11.58"]  # fmt: skip
STUDY = ["20240917", "2024-09-17", "17/09/2024", "09/17/2024", "17.09.2024", "17 September 2024",
         "September 17, 2024", "Sept 17, 2024", "17 Sep 2024", "9/17/2024", "17/9/2024", "the 17th of September 2024",
         "17-Sep-2024", "2024.09.17"]  # fmt: skip
SPELLINGS = NAMES + INSTITUTION + IDS + BIRTH + STUDY


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("typed") / "series"
    data = np.zeros((6, 24, 24), dtype=np.int16)
    data[2:4, 8:16, 8:16] = 500
    write_dicom_series(folder, data, "2.25.1122334455667788", "T1 axial", 2)
    for f in folder.iterdir():
        ds = pydicom.dcmread(f)
        for key, value in TAGS.items():
            setattr(ds, key, value)
        ds.save_as(f)
    return folder


def test_fifty_spellings() -> None:
    assert len(SPELLINGS) == 50 and len(set(SPELLINGS)) == 50


def test_every_spelling_is_removed_and_common_words_stay(study: Path) -> None:
    redactor = Redactor(study_identifiers(study, {"volumes": ["."]}, "radiology"))
    for spelling in SPELLINGS:
        sent = redactor.text(f"Compare with {spelling} please.")
        assert spelling.lower() not in sent.lower() and "[redacted]" in sent, (spelling, sent)
    kept = "Is the general memorial hospital view of the left lung mass normal, as in March 2021?"
    assert redactor.text(kept) == kept  # institution words and common words are not identifying on their own


def test_no_spelling_typed_into_chat_reaches_a_request(
    study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = [" and ".join(SPELLINGS[n : n + 10]) + ": anything new?" for n in range(0, 50, 10)]
    fake = FakeOpenAI([{"content": "Nothing new is seen."}])
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    try:
        args = ["chat", str(study), "--base-url", fake.base_url, "--trace-dir", str(tmp_path / "trace")]
        rc = main(args + [a for q in questions for a in ("--ask", q)])
    finally:
        fake.stop()
    assert rc == 0 and len(fake.requests) == 5
    sent = "\n".join(body.decode("utf-8") for body in fake.bodies).lower()
    leaked = [s for s in SPELLINGS if s.lower() in sent or s.lower().replace("/", "\\/") in sent]
    assert leaked == []
    err = capsys.readouterr().err
    assert err.count("removed from your question before it was sent") == 5 and "Brackenridge" in err
