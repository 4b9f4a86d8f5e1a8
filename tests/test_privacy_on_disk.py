"""Patient data private on disk: with the usual umask (022) every folder and file a chat session, a desktop
(view-model) session, a PACS retrieval and an export create is owner-only; a PACS config or token file others may
read is refused with the `chmod` to run; the trace names the study by a stable pseudonymous reference (path and
UIDs in an owner-only sidecar the report shows); `medcopilot sessions list | show | export --deidentify | purge`."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from copilot.cli import main
from copilot.pacs.orthanc import LocalOrthanc, missing
from copilot.panel.model import PanelModel
from copilot.panel.studies import RecentStudies, open_study, study_at, study_for
from copilot.privatefs import ExposedSecretsError, check_secret_file, private_dir, write_private
from copilot.replay import read_events, replay
from copilot.study.sessions import new_session_dir
from copilot.trace.study_ref import SIDECAR, study_record, study_reference
from tests.fake_openai import FakeOpenAI, tool
from tests.test_patient_banner import PATIENT, dicom_study


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def private_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Sessions, PACS cache and config in folders the app has yet to make."""
    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "app" / "sessions"))
    monkeypatch.setenv("MEDCOPILOT_PACS_CACHE", str(tmp_path / "app" / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "app" / "config"))
    monkeypatch.delenv("MEDCOPILOT_RETENTION_DAYS", raising=False)
    return tmp_path / "app"


def modes(root: Path) -> dict[str, str]:
    """Every path under a folder (itself included) whose mode is not owner-only: 0700 folders, 0600 files."""
    wrong = {}
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode != (0o700 if path.is_dir() else 0o600):
            wrong[str(path.relative_to(root.parent))] = f"{mode:04o}"
    return wrong


def _chat(study: Path, *extra: str) -> int:
    fake = FakeOpenAI([
        {"tool_calls": [tool("record_key_slice", {"view": "red", "label": "block"})]},
        {"content": "A bright block.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: 15.0"},
    ])  # fmt: skip
    try:
        return main(["chat", str(study), "--ask", "Is there a bright block?", "--base-url", fake.base_url, *extra])
    finally:
        fake.stop()


def _export(session: Any, name: str, args: dict[str, Any]) -> Any:
    """An export the clinician said yes to (with the consent to its plan where writes need one)."""
    try:
        from copilot.tools.writes import consent
    except ImportError:  # exports without a consent step
        return session.call(name, args, actor="clinician")
    plan = session.plan_write(name, args, actor="clinician")
    return session.call(name, args, actor="clinician", consent=consent(plan, args))


def test_helpers_make_owner_only_whatever_the_umask(tmp_path: Path, umask_022: None) -> None:
    folder = private_dir(tmp_path / "a" / "b" / "c")
    write_private(folder / "f.txt", "x")
    assert modes(tmp_path / "a") == {}
    widened = tmp_path / "old"
    widened.mkdir(mode=0o755)
    private_dir(widened)
    assert stat.S_IMODE(widened.stat().st_mode) == 0o700  # an older, wider folder of the app narrowed
    secret = write_private(tmp_path / "token", "t")
    check_secret_file(secret)
    secret.chmod(0o640)
    with pytest.raises(ExposedSecretsError, match=f"run `chmod 600 {secret}`"):
        check_secret_file(secret)


def test_umask_022_chat_and_desktop_sessions_are_owner_only(
    tmp_path: Path, private_env: Path, umask_022: None, capsys: pytest.CaptureFixture[str]
) -> None:
    study = tmp_path / "input" / "Brackwater_Henrietta"
    dicom_study(study)
    assert _chat(study) == 0  # the default sessions folder, made by the app
    sessions = private_env / "sessions"
    (chat,) = [p for p in sessions.iterdir() if p.is_dir()]
    assert {p.name for p in chat.iterdir()} >= {"trace.jsonl", "artifacts", "report.html", SIDECAR}
    # the desktop's view-model: a Track B session with an evidence report exported, its audit page written
    session = open_study(study_for(study), new_session_dir("radiology"), track="B")
    model = PanelModel(session, session.case)
    assert session.call("record_key_slice", {"view": "red", "label": "block"}, actor="clinician").ok
    exported = _export(session, "export_evidence_sr", {"output_name": "evidence"})
    assert exported.ok, exported.error
    model.export_report(Path(session.trace_dir) / "report.html")
    session.close()
    RecentStudies().add(study)  # the recent list names study folders
    assert (Path(session.trace_dir) / "derived" / "evidence.dcm").is_file()
    assert modes(private_env) == {}


@pytest.mark.slow  # a private Orthanc
@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_umask_022_pacs_retrieval_cache_and_stored_export_are_owner_only(
    tmp_path: Path, private_env: Path, umask_022: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot.pacs.client import PacsClient

    datasets = dicom_study(tmp_path / "input" / "ct")
    with LocalOrthanc() as pacs:
        monkeypatch.setenv("MEDCOPILOT_PACS_USER", pacs.user)
        monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", pacs.password)
        PacsClient(pacs.dicomweb).store(datasets, datasets[0].StudyInstanceUID)
        url = f"{pacs.dicomweb}/studies/{datasets[0].StudyInstanceUID}"
        session = open_study(study_at(url), new_session_dir("radiology"), track="B")
        assert session.call("record_key_slice", {"view": "red", "label": "block"}, actor="clinician").ok
        stored = _export(session, "export_evidence_sr", {"output_name": "evidence"})
        assert stored.ok and stored.result["stored_to"] == "pacs", stored.error
        PanelModel(session, session.case).export_report(Path(session.trace_dir) / "report.html")
        session.close()
    assert list((private_env / "cache").rglob("*.dcm"))
    assert (Path(session.trace_dir) / "derived" / "pacs_stored.jsonl").is_file()
    assert modes(private_env) == {}


def test_a_readable_pacs_config_is_refused_with_the_fix(
    tmp_path: Path, private_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = private_env / "config" / "medcopilot" / "pacs.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"servers": [{"url": "http://127.0.0.1:9/dicom-web", "username": "u",
                                               "password": "secret-pw"}]}))  # fmt: skip
    config.chmod(0o644)
    assert main(["pacs", "search", "http://127.0.0.1:9/dicom-web"]) == 2
    err = capsys.readouterr().err
    assert f"run `chmod 600 {config}`" in err and "[pacs_config]" in err and "secret-pw" not in err
    token = tmp_path / "token"
    token.write_text("tok\n")
    token.chmod(0o644)
    assert main(["serve", "--case", str(tmp_path), "--token-file", str(token)]) == 2
    assert f"run `chmod 600 {token}`" in capsys.readouterr().err


def test_trace_names_the_study_by_a_stable_reference(tmp_path: Path, private_env: Path) -> None:
    study = tmp_path / "input" / "Brackwater_Henrietta"
    datasets = dicom_study(study)
    other = tmp_path / "input" / "other"
    dicom_study(other, PatientName="Okonkwo^Adaeze")
    traces = [new_session_dir("radiology") for _ in range(3)]
    for folder, where in zip(traces, (study, study, other), strict=True):
        open_study(study_for(where), folder).close()
    heads = [read_events(t)[0][0] for t in traces]
    refs = [h["study_ref"] for h in heads]
    assert refs[0] == refs[1] != refs[2] and refs[0].startswith("study-") and len(refs[0]) == 26
    text = (traces[0] / "trace.jsonl").read_text()
    for secret in (str(study), "Brackwater", datasets[0].SeriesInstanceUID, datasets[0].StudyInstanceUID):
        assert secret not in text
    record = study_record(traces[0])
    assert record is not None and record["case_root"] == str(study.resolve())
    assert record["case_inputs"]["series_uid"] == datasets[0].SeriesInstanceUID
    assert stat.S_IMODE((traces[0] / SIDECAR).stat().st_mode) == 0o600
    assert replay(traces[0]).ok  # the sidecar puts the study back
    (traces[1] / SIDECAR).unlink()
    report = replay(traces[1])
    assert not report.ok and "no study.json" in report.summary()
    assert replay(traces[1], case_dir=study).ok is False  # the folder alone does not say which series


def test_a_reference_is_made_where_no_key_can_be_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "file" / "sessions"))  # cannot be made
    first = study_reference(tmp_path, {"volumes": ["."]})
    assert first.startswith("study-") and first == study_reference(tmp_path, {"volumes": ["."]})
    assert first != study_reference(tmp_path, {"volumes": ["a"]})


def _session(study: Path, age_days: float = 0.0) -> Path:
    assert _chat(study) == 0
    newest = max((p for p in new_session_dir("x").parent.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime_ns)
    if age_days:
        when = (newest / "trace.jsonl").stat().st_mtime - age_days * 86400
        os.utime(newest / "trace.jsonl", (when, when))
    return newest


def test_sessions_list_show_export_and_purge(
    tmp_path: Path, private_env: Path, capsys: pytest.CaptureFixture[str], umask_022: None
) -> None:
    study = tmp_path / "input" / "Brackwater_Henrietta"
    datasets = dicom_study(study)
    old = _session(study, age_days=45)
    new = _session(study)
    capsys.readouterr()
    assert main(["sessions", "list"]) == 0
    out = capsys.readouterr().out
    ref = read_events(new)[0][0]["study_ref"]
    assert old.name in out and new.name in out and out.count(ref) == 2
    assert "(past retention)" in out.splitlines()[0] and "kept 30 days (1 older" in out
    assert "Brackwater" not in out and str(study) not in out
    assert main(["sessions", "show", new.name[:-2]]) == 0
    shown = capsys.readouterr().out
    assert f"folder  {study.resolve()}" in shown and "Brackwater, Henrietta Q · ID HX-558201" in shown
    # a de-identified copy: no identifier of the study, a chain that verifies, no sidecar, report or exports
    out_dir = tmp_path / "shared" / "copy"
    assert main(["sessions", "export", new.name, str(out_dir), "--deidentify"]) == 0
    assert "left out: study.json, report.html" in capsys.readouterr().out
    events, failure = read_events(out_dir)
    assert failure is None and events[0]["deidentified"] is True and events[0]["study_ref"] == ref
    text = (out_dir / "trace.jsonl").read_text()
    for secret in (*PATIENT.values(), str(study.resolve()), study.name, datasets[0].SeriesInstanceUID):
        assert secret not in text, secret
    assert not (out_dir / SIDECAR).exists() and not (out_dir / "report.html").exists()
    assert modes(out_dir) == {}
    # retention: the user's setting, applied by purge when asked
    assert main(["sessions", "purge", "--dry-run"]) == 0
    assert f"would remove {old.name}" in capsys.readouterr().out and old.exists()
    assert main(["sessions", "retention", "60"]) == 0 and "kept 60 days" in capsys.readouterr().out
    assert main(["sessions", "purge"]) == 0 and "removed 0 session(s)" in capsys.readouterr().out
    assert main(["sessions", "retention", "30"]) == 0
    assert main(["sessions", "purge"]) == 0
    assert f"removed {old.name}" in capsys.readouterr().out and not old.exists() and new.exists()
    assert main(["sessions", "purge", "--older-than", "-1"]) == 2
    assert main(["sessions", "purge", "--older-than", "0"]) == 0 and not new.exists()
    assert (private_env / "sessions" / ".pseudonym-key").is_file()  # the key stays for the next session
    assert main(["sessions", "show", "nope"]) == 2 and "no session named 'nope'" in capsys.readouterr().err
