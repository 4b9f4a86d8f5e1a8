"""ACP-Bench's (seed 000) checkpoint statuses as written: NA valued 0 in the denominator, SKIP left out, the
choice a recorded rule; A3 credits Table 10's capture tool."""

from __future__ import annotations

from typing import Any

import pytest

from copilot.bench.measures import workflow_audit as W
from copilot.bench.scoring.rules import parse_rules, rules_key


def _ctx(calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"calls": calls, "reactions": [], "coverage": {"positive": False, "bins": {}, "fields": [[0, 40.0]]},
            "parse_error": None, "cited_items": 0, "unobserved": 0, "quantities": 0, "f2": False,
            "verification": None, "fault_codes": [], "required": 0}  # fmt: skip


def test_a3_with_capture_viewer_and_a_correct_negative_slide() -> None:
    """A correct negative lymph-node slide under the paper protocol: calls zoom, capture_viewer (both valid).
    P1 PARTIAL 1·0.5 (a zoom first), A1 PASS 2·1, A3 PASS 1·1 (capture_viewer is the capture call), A5 PASS 1·1
    (40× reached), D1 PASS 2·1; A2 SKIP (negative: no target), A4, D2, D3, R1, R2 SKIP.
    S = (0.5 + 2 + 1 + 1 + 2) / (1 + 2 + 1 + 1 + 2) = 6.5 / 7 = 0.929 ≥ 0.75: a formal pass. Before, A3 FAILed
    without a record_* call: 5.5 / 7 = 0.786, and the paper protocol (no record_* tool) could never pass A3."""
    calls = [{"handler": "zoom", "ok": True, "seq": 1}, {"handler": "capture_viewer", "ok": True, "seq": 2}]
    items = W.checkpoint_results("lymph_node_wsi", _ctx(calls), "pathology")
    status = {r["id"]: r["status"] for r in items}
    assert status["A3"] == "PASS" and status["A2"] == "SKIP" and status["P1"] == "PARTIAL"
    assert W.completion_score(items) == pytest.approx(6.5 / 7)
    without = W.checkpoint_results("lymph_node_wsi", _ctx(calls[:1]), "pathology")
    assert {r["id"]: r["status"] for r in without}["A3"] == "FAIL"


def test_the_na_choice_is_a_recorded_rule() -> None:
    """checkpoint_na=zero is the seed's reading (no departure, key ""); skip is a departure, in the result key."""
    assert rules_key(parse_rules(["checkpoint_na=zero"])) == ""
    assert rules_key(parse_rules(["checkpoint_na=skip"])) == "checkpoint_na=skip"
    with pytest.raises(ValueError, match="checkpoint_na must be one of zero, skip"):
        parse_rules(["checkpoint_na=half"])
