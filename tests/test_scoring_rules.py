"""Scoring edges: Loc scored apart from the answer line, the lung Task denominator rule, and the paper protocol's
Track B exactly Appendix B (hand-computed fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copilot.bench.scoring.rules import parse_rules
from copilot.cases.brain import make_brain_case
from copilot.cases.lung import make_lung_case
from copilot.cases.pack import load_case
from copilot.cases.wsi import make_lymph_case
from copilot.medflow import score_case
from copilot.runtime import open_session
from copilot.tools.protocols import PAPER_BRIDGE_HANDLERS, PAPER_RADIOLOGY_TOOLS
from tests.oracle import evidence_block, perfect_evidence, tumour_point


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("rules")
    return {
        "brain": make_brain_case(out, "brain_A", 12, spacing=4.0, label="A"),
        "lung": make_lung_case(out, "lung", 20, spacing=6.0),
        "lymph": make_lymph_case(out, "lymph_macro", 3, size=(1024, 768), mpp=4.0, largest="macro"),
    }


def test_unparsable_answer_line_keeps_loc(packs: dict[str, Path]) -> None:
    """Brain: the EVIDENCE block's RAS point lies deep in the mask, the answer line is `ANSWER: Z` (no such
    letter): Task 0, Strict 0, Loc 1 (was 0). Without a parsable block Loc stays 0."""
    case = load_case(packs["brain"])
    slices, ras = perfect_evidence(packs["brain"])
    s = score_case(case, f"Rationale.\n{evidence_block(slices, ras)}ANSWER: Z")
    assert (s.task, s.strict, s.loc) == (0.0, 0.0, 1.0) and s.parse_error is not None
    assert score_case(case, "ANSWER: Z").loc == 0.0


def test_unparsable_lung_answers_keep_loc(packs: dict[str, Path]) -> None:
    """Lung: the five compact answers missing, the evidence block inside the lesion: Loc 1."""
    case = load_case(packs["lung"])
    slices, ras = perfect_evidence(packs["lung"])
    s = score_case(case, f"Rationale.\n{evidence_block(slices, ras)}")
    assert (s.task, s.strict, s.loc) == (0.0, 0.0, 1.0)


def test_slide_labels_unparsable_localizations_scored(packs: dict[str, Path]) -> None:
    """Lymph node, positive: `tumor_presence` is not a valid value but the localization is in the tumour: Loc 1."""
    case = load_case(packs["lymph"])
    x, y = tumour_point(packs["lymph"], "Tumor")
    answer = json.dumps({"tumor_presence": "maybe", "largest_metastasis": "macro",
                         "localizations": [{"x": x, "y": y}]})  # fmt: skip
    s = score_case(case, answer)
    assert (s.task, s.loc) == (0.0, 1.0) and s.parse_error is not None


def test_lung_task_denominator(packs: dict[str, Path]) -> None:
    """The truth's question 5 set to not collected (None), the answer right on questions 1–4: `five` (default,
    Table 4 "#correct/5") gives 4/5 = 0.8; `scorable` gives 4/4 = 1.0."""
    truth_path = packs["lung"] / "hidden" / "truth.json"
    saved = truth_path.read_text()
    truth = json.loads(saved)
    answers = truth["answers"]
    answers["5"] = None
    truth_path.write_text(json.dumps(truth))
    try:
        case = load_case(packs["lung"])
        text = "".join(f"{q}{answers[q]}" for q in "1234") + "5A"
        assert score_case(case, text).task == pytest.approx(0.8)
        scorable = score_case(case, text, rules=parse_rules(["lung_task_denominator=scorable"]))
        assert scorable.task == 1.0 and scorable.details["rules"] == {"lung_task_denominator": "scorable"}
    finally:
        truth_path.write_text(saved)


def test_paper_track_b_is_exactly_appendix_b(packs: dict[str, Path]) -> None:
    """Track B under the paper protocol with every operation: Table 9's tools plus Appendix B's named bridge
    handlers; the product's evidence export (a DICOM SR) is not one of them."""
    session = open_session(packs["brain"], track="B", ops="all", protocol="paper")
    names = {s.name for s in session.registry.specs("B")}
    assert "export_evidence_sr" not in names
    assert names == set(PAPER_RADIOLOGY_TOOLS) | set(PAPER_BRIDGE_HANDLERS)
    harness = open_session(packs["brain"], track="B", ops="all")
    assert "export_evidence_sr" in {s.name for s in harness.registry.specs("B")}
