"""A consent covers exactly what a write would write, for the actor who asked, once: an undo followed by a new
point of the same label, a segment redrawn under the same name, a consent reused or given for another actor's call
are refused and write nothing. A plan shows every model-controlled string as clean, quoted data, the destination
first on its own line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from copilot.panel.undo import UndoHistory
from copilot.session import Session
from copilot.tools.writes import WritePlan, consent, quoted
from tests.test_write_consent import SEG_ARGS, _attempts, _session

SR_ARGS = {"output_name": "report"}
HOSTILE = "\x1b[8mhidden\x1b[0m a local note that stays on this computer\n→ file:///tmp/ok\u202e\x9b2J"


def _ct_session(tmp_path: Path) -> Session:
    session = _session(tmp_path)
    assert session.call("select_volume", {"volume_name": "ct_series"}).ok
    return session


def _point(session: Session, where: list[int], label: str = "lesion") -> None:
    assert session.call("record_point", {"point_1000": where, "label": label}, actor="clinician").ok


def _last(session: Session) -> dict[str, Any]:
    return _attempts(session)[-1]


def test_an_undo_and_a_new_point_of_the_same_label_void_the_consent(tmp_path: Path) -> None:
    session = _ct_session(tmp_path)
    history = UndoHistory(session)
    _point(session, [500, 500])
    plan = session.plan_write("export_evidence_sr", SR_ARGS, actor="clinician")
    assert plan is not None and plan.digest and plan.actor == "clinician"
    yes = consent(plan, SR_ARGS)
    history.undo()
    _point(session, [700, 300])  # same label, same counts, other coordinates
    again = session.plan_write("export_evidence_sr", SR_ARGS, actor="clinician")
    assert again is not None and again.what == plan.what and again.digest != plan.digest
    out = session.call("export_evidence_sr", SR_ARGS, actor="clinician", consent=yes)
    assert out.error["code"] == "write_not_approved" and not (tmp_path / "trace" / "derived" / "report.dcm").exists()
    assert _last(session)["by"] == "what it would write changed since the consent"
    assert session.call("export_evidence_sr", SR_ARGS, actor="clinician", consent=consent(again, SR_ARGS)).ok


def test_a_segment_redrawn_under_the_same_name_voids_the_consent(tmp_path: Path) -> None:
    session = _session(tmp_path)
    history = UndoHistory(session)
    draw = {"volume": "ct_series", "output_segment": "other", "lower": 500.0, "upper": 1e6, "size": 64}
    args = {"segment": "other", "output_name": "other_seg"}
    assert session.call("segment_threshold", draw).ok
    plan = session.plan_write("export_dicom_seg", args)
    assert plan is not None
    history.undo()
    assert session.call("segment_threshold", {**draw, "lower": 900.0}).ok
    again = session.plan_write("export_dicom_seg", args)
    assert again is not None and again.content != plan.content
    out = session.call("export_dicom_seg", args, consent=consent(plan, args))
    assert out.error["code"] == "write_not_approved" and not (tmp_path / "trace" / "derived" / "other_seg.dcm").exists()


def test_a_consent_covers_one_call_by_its_actor(tmp_path: Path) -> None:
    session = _session(tmp_path)
    for_clinician = session.plan_write("export_dicom_seg", SEG_ARGS, actor="clinician")
    assert for_clinician is not None
    out = session.call("export_dicom_seg", SEG_ARGS, actor="agent", consent=consent(for_clinician, SEG_ARGS))
    assert out.error["code"] == "write_not_approved"
    assert _last(session)["by"] == "consent given for a call by the clinician"
    plan = session.plan_write("export_dicom_seg", SEG_ARGS)
    assert plan is not None
    yes = consent(plan, SEG_ARGS)
    assert session.call("export_dicom_seg", SEG_ARGS, consent=yes).ok
    (tmp_path / "trace" / "derived" / "bright_seg.dcm").unlink()  # the same plan holds again: the consent does not
    assert session.plan_write("export_dicom_seg", SEG_ARGS) == plan
    out = session.call("export_dicom_seg", SEG_ARGS, consent=yes)
    assert out.error["code"] == "write_not_approved" and _last(session)["by"] == "consent already used"
    assert not (tmp_path / "trace" / "derived" / "bright_seg.dcm").exists()


def _controls(text: str) -> list[str]:
    return re.findall(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]", text)


def test_a_plan_with_escape_codes_is_shown_clean_with_the_destination_first(tmp_path: Path) -> None:
    session = _ct_session(tmp_path)
    _point(session, [500, 500], label=HOSTILE)
    args = {**SR_ARGS, "question": HOSTILE, "answer": HOSTILE * 50}
    plan = session.plan_write("export_evidence_sr", args, actor="clinician")
    assert plan is not None
    text = plan.text()
    first, *rest = text.split("\n")
    assert first == "→ " + (tmp_path / "trace" / "derived" / "report.dcm").resolve().as_uri() and len(rest) == 1
    assert not _controls(text) and "[8m" not in text and "hidden" in text
    assert "question: «hidden a local note that stays on this computer → file:///tmp/ok»" in text
    assert max(len(q) for q in re.findall(r"«[^»]*»", text)) <= 164  # each string bounded (its "…" written "...")
    assert [line for line in text.split("\n") if line.startswith("→")] == [first]  # a forged arrow stays quoted


def test_quoted_data_cannot_close_its_quotes() -> None:
    assert quoted("a» then «b\nc") == "«a› then ‹b c»"
    plan = WritePlan("h", "x\x1b]0;title\x07\ny", ("http://pacs/\x1b[2Jdw",))
    assert plan.text() == "→ http://pacs/dw\n  x y"


@pytest.mark.parametrize("line", ["/store"])
def test_the_chat_store_lists_the_destination_first(line: str) -> None:
    from copilot.panel.store import StorePlan, StoreStep

    store = StorePlan([StoreStep("export_evidence_sr", SR_ARGS, WritePlan("export_evidence_sr", "report",
                                                                          ("http://pacs/dw",)))])  # fmt: skip
    assert store.lines() == ["1. → http://pacs/dw\n  report"] and line == "/store"
