"""A study opened beside the open one is checked to be of the same patient: spellings of the same patient pass, a
study of another patient is refused unless the clinician accepts both shown side by side, and the check is traced
by the fields that differ (never their values); the panes name each study by its date, interval and description."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pydicom
import pytest

from copilot.pacs.patient import PatientFacts, study_facts
from copilot.panel.same_patient import OtherPatient, caption, check_patient, differences, interval, mismatch
from copilot.panel.studies import open_study, study_for
from copilot.replay import read_events
from tests.workstation_data import write_dicom_series

NOW = PatientFacts(name="MÜLLER^HANS", patient_id="PAT-4471-0932", birth_date="19610303", study_date="20250212",
                   study_description="CT Thorax")  # fmt: skip
SAME = PatientFacts(name="Mueller^Hans", patient_id="pat 4471 0932", birth_date="19610303", study_date="20240812",
                    study_description="CT Thorax")  # fmt: skip
OTHER = PatientFacts(name="QUIXLEY^JOHNATHAN", patient_id="MRN-7734921", birth_date="19581123",
                     study_date="20240812", study_description="CT Chest")  # fmt: skip


class Notes:
    def __init__(self) -> None:
        self.notes: list[tuple[str, dict[str, Any]]] = []

    def note(self, kind: str, payload: dict[str, Any]) -> None:
        self.notes.append((kind, payload))


def test_the_same_patient_in_other_spellings_passes_and_another_differs() -> None:
    assert differences(NOW, SAME) == ()
    assert differences(NOW, PatientFacts(name="Hans Muller", patient_id="PAT44710932", birth_date="19610303")) == ()
    assert differences(NOW, OTHER) == ("patient ID", "name", "birth date")
    wrong_id = PatientFacts(name="MÜLLER^HANS", patient_id="PAT-4471-0933")
    assert differences(NOW, wrong_id) == ("patient ID", "birth date")
    assert differences(None, None) == () and differences(None, OTHER) == ("patient ID", "name", "birth date")


def test_another_patient_is_refused_or_accepted_in_the_dialog_and_traced() -> None:
    found = mismatch(NOW, OTHER)
    assert found is not None
    shown = found.side_by_side("prior")
    assert "MÜLLER, HANS" in shown and "QUIXLEY, JOHNATHAN" in shown and "MRN-7734921" in shown
    session = Notes()
    with pytest.raises(OtherPatient, match="another patient"):
        check_patient(session, NOW, OTHER, "prior", None)
    with pytest.raises(OtherPatient):
        check_patient(session, NOW, OTHER, "prior", lambda m: False)
    asked: list[Any] = []
    check_patient(session, NOW, OTHER, "prior", lambda m: asked.append(m) or True)
    check_patient(session, NOW, SAME, "prior", lambda m: pytest.fail("the same patient is not asked about"))
    decisions = [p.get("decision", "same") for _, p in session.notes]
    assert decisions == ["refused", "refused", "accepted by the clinician", "same"] and asked == [found]
    assert all(k == "patient_check" for k, _ in session.notes)
    assert "QUIXLEY" not in str(session.notes) and "7734921" not in str(session.notes)


def test_pane_captions_name_the_date_and_how_much_earlier() -> None:
    assert caption(SAME, "prior", NOW) == "PRIOR 2024-08-12 · 6 months earlier · CT Thorax"
    assert caption(NOW) == "2025-02-12 · CT Thorax"
    assert interval("20250212", "20250201") == "11 days earlier"
    assert interval("20250212", "20210101") == "4 years earlier" and interval("20240101", "20240201") == "1 month later"
    assert interval("20250212", "20250212") == "same day" and interval("", "20250212") == ""


def _series(folder: Path, tags: dict[str, str]) -> Path:
    data = np.zeros((4, 16, 16), dtype=np.int16)
    data[1:3, 4:12, 4:12] = 300
    write_dicom_series(folder, data, f"2.25.{abs(hash(str(folder))) % 10**12}", "CT", 1)
    for f in folder.iterdir():
        ds = pydicom.dcmread(f)
        for key, value in tags.items():
            setattr(ds, key, value)
        ds.save_as(f)
    return folder


def test_a_session_traces_the_check_of_a_real_prior(tmp_path: Path) -> None:
    now = _series(tmp_path / "now", {"PatientName": "QUIXLEY^JOHNATHAN", "PatientID": "MRN-7734921"})
    prior = _series(tmp_path / "prior", {"PatientName": "BRACKWATER^HENRIETTA", "PatientID": "HX-558201"})
    study = study_for(str(now))
    session = open_study(study, tmp_path / "trace")
    current = study_facts(study.root, dict(study.inputs or {}))
    other_study = study_for(str(prior))
    other = study_facts(other_study.root, dict(other_study.inputs or {}))
    with pytest.raises(OtherPatient):
        check_patient(session, current, other, "prior", lambda m: False)
    session.close({"status": "test"})
    events, failure = read_events(tmp_path / "trace")
    [check] = [e for e in events if e.get("type") == "patient_check"]
    assert failure is None and check["differs"] == ["patient ID", "name"] and check["decision"] == "refused"
    assert "HX-558201" not in (tmp_path / "trace" / "trace.jsonl").read_text()


def _two_patients(root: Path) -> Path:
    """One folder holding two series of two patients."""
    for n, uid in enumerate(("2.25.71", "2.25.72"), start=1):
        data = np.zeros((4, 16, 16), dtype=np.int16)
        data[1:3, 4:12, 4:12] = 300
        write_dicom_series(root, data, uid, f"series {n}", n)
    for f in root.iterdir():
        ds = pydicom.dcmread(f)
        ds.PatientName, ds.PatientID = ("QUIXLEY^JOHNATHAN", "MRN-7734921") if ds.SeriesNumber == 1 else \
            ("BRACKWATER^HENRIETTA", "HX-558201")  # fmt: skip
        ds.save_as(f)
    return root


def test_series_of_two_patients_are_not_opened_together_by_chat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from copilot.cli import main
    from copilot.panel.same_patient import series_mismatch
    from copilot.panel.studies import dicom_series

    folder = _two_patients(tmp_path / "mixed")
    found = dicom_series(folder)
    assert series_mismatch(found[:1]) is None
    mixed = series_mismatch(found)
    assert mixed is not None and mixed.differs == ("patient ID", "name")
    rc = main(["chat", str(folder), "--series", "1,2", "--ask", "?", "--base-url", "http://127.0.0.1:9/v1",
               "--trace-dir", str(tmp_path / "t")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and "the series chosen are of different patients (patient ID, name differ)" in err
    assert not (tmp_path / "t").exists()
