"""The clinician's Store after a follow-up question: the report holds that answer's text and that answer's evidence
only, a point the answer restates from the model's record once, and a second Store of the same says it is stored
already instead of writing it again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pydicom

from copilot.pacs.sample import write_ct_series
from copilot.panel.model import PanelModel
from copilot.panel.store import plan_store, store_with
from copilot.panel.studies import open_study, study_at
from copilot.study.policies import conversation, model_settings
from tests.dicom_validator import assert_valid_dicom
from tests.fake_openai import FakeOpenAI, tool
from tests.test_clinician_store import texts


def test_store_after_a_follow_up_holds_that_answer_only_and_is_not_repeated(tmp_path: Path) -> None:
    write_ct_series(tmp_path / "ct", 4)
    study = study_at(tmp_path / "ct")
    session = open_study(study, tmp_path / "t")
    vol = session.scene_data()["volume"]  # type: ignore[index]
    a, b = ([round(float(v), 2) for v in vol.ijk_to_ras_point(np.array(ijk))] for ijk in ([100, 100, 1], [60, 50, 2]))
    fake = FakeOpenAI([
        {"tool_calls": [tool("record_point", {"ras": a, "label": "first finding"})]},
        {"content": f"A first finding.\nEVIDENCE:\nRAS: {a} first finding"},
        {"tool_calls": [tool("record_point", {"ras": b, "label": "second finding"})]},
        {"content": f"A second finding.\nEVIDENCE:\nRAS: {b} second finding"},
    ])  # fmt: skip
    model = PanelModel(session, study)
    try:
        policy = conversation(model_settings("openai:scripted-model", base_url=fake.base_url), study, study.kind)
        for question in ("Anything in the chest?", "And below it?"):
            model.run_episode(policy, question)
            assert model.wait(30) and model.status == "done", model.messages
    finally:
        fake.stop()
    plan, outcomes = store_with(model, lambda shown: ("approve", ""))
    assert [o.ok for o in outcomes] == [True], [o.error for o in outcomes]
    assert "1 point(s)" in plan.lines()[0] and plan.steps[0].args["evidence_ids"] == [2]
    path = tmp_path / "t" / "derived" / "clinician_report.dcm"
    assert_valid_dicom(path)
    sr = pydicom.dcmread(path)
    second = f"A second finding.\nEVIDENCE:\nRAS: {b} second finding"
    assert texts(sr) == {"Request": "And below it?", "Finding": second}
    points = [item for item in _items(sr) if item.ValueType == "SCOORD3D"]
    assert len(points) == 1 and np.allclose(points[0].GraphicData, [-b[0], -b[1], b[2]], atol=1e-3)
    assert len(session.evidence()) == 2  # the restated point was not recorded a second time

    first, outcomes = store_with(model, lambda shown: ("approve", ""), answer=0)  # the clinician picks answer 1
    assert [o.ok for o in outcomes] == [True] and first.steps[0].args["evidence_ids"] == [1]
    assert texts(pydicom.dcmread(path.parent / "clinician_report_2.dcm"))["Request"] == "Anything in the chest?"
    assert "there is no answer 3" in plan_store(model, answer=2).problems[0]

    again, outcomes = store_with(model, lambda shown: ("approve", ""))
    session.close()
    assert outcomes == [] and not again.steps
    assert any("stored already as clinician_report.dcm" in p for p in again.problems), again.problems
    assert sorted(p.name for p in path.parent.glob("*.dcm")) == ["clinician_report.dcm", "clinician_report_2.dcm"]


def _items(ds: pydicom.Dataset) -> list[pydicom.Dataset]:
    found, pending = [], list(ds.ContentSequence)
    while pending:
        item = pending.pop()
        found.append(item)
        pending.extend(getattr(item, "ContentSequence", []))
    return found


def test_a_segmentation_stored_already_is_not_stored_again(tmp_path: Path) -> None:
    """The model exported its segment as a SEG; the clinician's Store then says it is stored already instead of
    writing it again as `bright_seg_2`; the same segment under another name is `already_stored` too."""
    write_ct_series(tmp_path / "ct", 4)
    study = study_at(tmp_path / "ct")
    session = open_study(study, tmp_path / "t", track="B")
    args = {"volume": "chest axial", "output_segment": "bright", "lower": 1100.0, "upper": 5000.0, "size": 64}
    assert session.call("segment_threshold", args).ok
    seg = {"segment": "bright", "output_name": "bright_seg"}
    first = session.call("export_dicom_seg", seg, actor="clinician", consent=_consent(session, "export_dicom_seg", seg))
    assert first.ok, first.error
    plan = plan_store(PanelModel(session, study))
    again = session.call("export_dicom_seg", {"segment": "bright", "output_name": "other"})
    session.close()
    assert not any(s.handler == "export_dicom_seg" for s in plan.steps)
    assert any("stored already as bright_seg.dcm" in p for p in plan.problems), plan.problems
    assert not again.ok and (again.error or {})["code"] == "already_stored"
    assert sorted(p.name for p in (tmp_path / "t" / "derived").glob("*.dcm")) == ["bright_seg.dcm"]


def _consent(session: Any, handler: str, args: dict[str, Any]) -> Any:
    """The clinician's yes to exactly the plan of one call."""
    from copilot.tools.writes import consent

    plan = session.plan_write(handler, args, actor="clinician")
    assert plan is not None
    return consent(plan, args)


def test_chat_store_n_stores_that_answer(tmp_path: Path) -> None:
    """`/store 1` in `chat` after two questions plans the first question and its answer; a bad number is said."""
    from tests.test_clinician_store import chat_lines

    write_ct_series(tmp_path / "ct", 4)
    fake = FakeOpenAI([{"content": "First answer."}, {"content": "Second answer."}])
    try:
        rc, out = chat_lines([str(tmp_path / "ct"), "--base-url", fake.base_url, "--trace-dir", str(tmp_path / "t")],
                             ["First question?", "Second question?", "/store 1", "/approve", "/store one"])  # fmt: skip
    finally:
        fake.stop()
    assert rc == 0, out
    assert "question: «First question?»" in out and "answer: «First answer.»" in out and "Second question?»" not in out
    assert "clinician_report.dcm: written" in out and "/store N the N-th answer" in out
