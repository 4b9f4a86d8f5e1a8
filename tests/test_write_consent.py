"""Two kinds of actions: a call that writes outside the session (a DICOM SEG or SR export, a PACS store) runs only
with the clinician's yes to exactly what it writes and where, or in a headless run whose `--allow-store` names the
destination; otherwise it is refused by name, nothing is written, and the trace shows the attempt."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from copilot.agent.policy import ScriptedPolicy
from copilot.panel.model import PanelModel
from copilot.replay import replay
from copilot.runtime import open_session
from copilot.session import Session
from copilot.tools import RADIOLOGY
from copilot.tools.writes import consent

SEG_ARGS = {"segment": "bright", "output_name": "bright_seg"}


def _session(tmp_path: Path, allow_store: tuple[str, ...] | None = ()) -> Session:
    """A Track B session on a case with a CT series imported and a segment drawn on it."""
    from tests.test_adapters import _dicom_series, _nifti

    case = tmp_path / "case"
    _nifti(case / "images" / "T1.nii.gz", np.zeros((4, 5, 6), np.float32))
    (case / "case.json").write_text(
        json.dumps({"case_id": "d", "module": "brain_mri", "inputs": {"volumes": ["images/T1.nii.gz"]}})
    )
    _dicom_series(case / "images" / "ct_series", 4, "CT", 0.0, 2.5)
    session = open_session(case, track="B", trace_dir=tmp_path / "trace", allow_store=allow_store)
    assert session.call("import_dicom", {"path": "images/ct_series"}).ok
    args = {"volume": "ct_series", "output_segment": "bright", "lower": 500.0, "upper": 1e6, "size": 64}
    assert session.call("segment_threshold", args).ok
    return session


def _attempts(session: Session) -> list[dict[str, Any]]:
    return [e for e in session.trace_events() if e["type"] == "write_attempt"]


def test_every_handler_declares_its_kind_and_only_the_exports_write() -> None:
    writers = sorted(s.name for s in RADIOLOGY.specs() if s.effect == "writes")
    assert writers == ["export_dicom_seg", "export_evidence_sr", "export_key_images", "export_response_sr"]
    assert all(s.effect == "looks" for s in RADIOLOGY.specs() if s.name not in writers)


def test_a_write_without_consent_is_refused_by_name_and_writes_nothing(tmp_path: Path) -> None:
    session = _session(tmp_path)
    before = session.snapshot()
    out = session.call("export_dicom_seg", SEG_ARGS, actor="agent")
    assert not out.ok and out.status == 403 and out.error["code"] == "write_not_approved"
    message = out.error["message"]
    assert "export_dicom_seg writes outside the session" in message and "--allow-store" in message
    assert not (tmp_path / "trace" / "derived" / "bright_seg.dcm").exists() and session.snapshot() == before
    (attempt,) = _attempts(session)
    target = (tmp_path / "trace" / "derived" / "bright_seg.dcm").resolve().as_uri()
    assert attempt["decision"] == "refused" and attempt["destinations"] == [target] and attempt["actor"] == "agent"
    assert "segment «bright»" in attempt["what"]


def test_the_clinicians_yes_covers_exactly_the_plan_shown(tmp_path: Path) -> None:
    session = _session(tmp_path)
    plan = session.plan_write("export_dicom_seg", SEG_ARGS)
    assert plan is not None and plan.destinations[0].endswith("/derived/bright_seg.dcm")
    assert session.plan_write("record_point", {"ras": [0.0, 0.0, 0.0]}) is None  # a call that only looks
    other = {**SEG_ARGS, "output_name": "other"}
    refused = session.call("export_dicom_seg", other, consent=consent(plan, SEG_ARGS))  # a yes to another plan
    assert refused.error["code"] == "write_not_approved" and not (tmp_path / "trace" / "derived" / "other.dcm").exists()
    out = session.call("export_dicom_seg", SEG_ARGS, consent=consent(plan, SEG_ARGS))
    assert out.ok, out.error
    assert (tmp_path / "trace" / "derived" / "bright_seg.dcm").is_file()
    assert [(a["decision"], a["by"]) for a in _attempts(session)] == [
        ("refused", "consent for another plan"), ("approved", "clinician")
    ]
    session.close()
    report = replay(tmp_path / "trace")  # the refused and the approved export are checked, never written again
    assert report.ok and report.exports == 2, report.summary()


def test_allow_store_names_the_destination_of_a_headless_run(tmp_path: Path) -> None:
    pacs_only = _session(tmp_path / "a", allow_store=("http://pacs.example/dicom-web",))
    assert pacs_only.call("export_dicom_seg", SEG_ARGS).error["code"] == "write_not_approved"
    folder = _session(tmp_path / "c", allow_store=(str(tmp_path / "elsewhere"),))  # the export goes into that folder
    assert folder.call("export_dicom_seg", SEG_ARGS).ok
    assert (tmp_path / "elsewhere" / "bright_seg.dcm").is_file()
    assert not (tmp_path / "c" / "trace" / "derived" / "bright_seg.dcm").exists()
    named = _session(tmp_path / "b", allow_store=((tmp_path / "b" / "trace").as_uri(),))
    out = named.call("export_dicom_seg", SEG_ARGS)
    assert out.ok, out.error
    assert [(a["decision"], a["by"]) for a in _attempts(named)] == [("allowed", "--allow-store")]


def test_allow_store_refuses_a_url_with_credentials(capsys: pytest.CaptureFixture[str]) -> None:
    from copilot.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--case", "x", "--allow-store", "http://user:pw@pacs.example/dicom-web"])
    assert exc.value.code == 2 and "--allow-store" in capsys.readouterr().err


@pytest.mark.parametrize("approve_each", [False, True])
def test_the_desktop_always_asks_before_a_write_whatever_the_approve_mode(tmp_path: Path, approve_each: bool) -> None:
    session = _session(tmp_path)
    script = tmp_path / "script.json"
    calls = [{"handler": "export_dicom_seg", "args": SEG_ARGS}, {"handler": "export_dicom_seg", "args": SEG_ARGS}]
    script.write_text(json.dumps({"calls": calls, "answer": "done"}))
    model = PanelModel(session)
    model.set_approve_mode(approve_each)
    model.run_episode(ScriptedPolicy(script))
    shown: list[str] = []
    decisions = ["reject", "approve"]
    seen = None
    while not model.wait(0.02):
        pending = model.pending
        if pending is not None and pending is not seen:
            seen = pending
            assert pending.write is not None
            shown.append(pending.write.text())
            assert not (tmp_path / "trace" / "derived" / "bright_seg.dcm").exists()  # asked before anything
            model.reject("not now") if decisions.pop(0) == "reject" else model.approve()
    assert model.status == "done" and len(shown) == 2
    assert "DICOM SEG 'bright_seg'" in shown[0] and "/derived/bright_seg.dcm" in shown[0]
    assert [e.status for e in model.timeline if e.handler == "export_dicom_seg"] == ["rejected", "ok"]
    assert (tmp_path / "trace" / "derived" / "bright_seg.dcm").is_file()
    kinds = [e["type"] for e in session.trace_events()]
    assert kinds.count("clinician_rejection") == 1 and kinds.count("clinician_approval") == 1
    decided = [(a["decision"], a["by"]) for a in _attempts(session)]
    assert decided == [("rejected", "clinician"), ("approved", "clinician")]


def test_the_slicer_and_qupath_panels_always_ask_before_a_write(tmp_path: Path) -> None:
    from copilot.cases.pack import CasePack
    from copilot.host.conversation import HostConversation
    from copilot.host.panel import panel_state

    session = _session(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"calls": [{"handler": "export_dicom_seg", "args": SEG_ARGS}], "answer": "done"}))
    study = CasePack(Path("."), "own-study", "host_radiology", {}, {}, "radiology")
    conv = HostConversation(session, study, lambda: ScriptedPolicy(script))
    conv.approve_each = False  # the clinician turned "ask me before every action" off
    turn = conv.ask("Export the segment")
    deadline = time.monotonic() + 30
    while conv.pending is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pending = panel_state(conv).pending
    assert pending.startswith("Proposed: export_dicom_seg") and "Writes outside the session:\n→ file:" in pending
    assert "\n  DICOM SEG" in pending
    conv.reject("not to this folder")
    assert conv.wait(30) and turn.status == "done"
    assert not (tmp_path / "trace" / "derived" / "bright_seg.dcm").exists()
    assert [(a["decision"], a["by"]) for a in _attempts(session)] == [("rejected", "clinician")]


def test_allow_store_from_the_command_line_reaches_every_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot.runtime import ALLOW_STORE_ENV

    monkeypatch.setenv(ALLOW_STORE_ENV, str(tmp_path))  # what `--allow-store` sets for the run and its workers
    session = _session(tmp_path, None)  # opened without naming a destination itself
    assert session.allow_store == (str(tmp_path),) and session.call("export_dicom_seg", SEG_ARGS).ok
