"""The clinician's Store after a follow-up question: the report holds that answer's text and that answer's evidence
only, a point the answer restates from the model's record once, and a second Store of the same says it is stored
already instead of writing it again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom

from copilot.pacs.sample import write_ct_series
from copilot.panel.model import PanelModel
from copilot.panel.store import store_with
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

    again, outcomes = store_with(model, lambda shown: ("approve", ""))
    session.close()
    assert outcomes == [] and not again.steps
    assert any("stored already as clinician_report.dcm" in p for p in again.problems), again.problems
    assert sorted(p.name for p in path.parent.glob("*.dcm")) == ["clinician_report.dcm"]


def _items(ds: pydicom.Dataset) -> list[pydicom.Dataset]:
    found, pending = [], list(ds.ContentSequence)
    while pending:
        item = pending.pop()
        found.append(item)
        pending.extend(getattr(item, "ContentSequence", []))
    return found
