"""Track C's own prompt: no tool named and no budget, in the product's wording or the paper's (`--protocol
paper`), the answer format intact."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from copilot.cases.pack import load_case
from copilot.kinds import viewer_kind
from copilot.medflow.trackc import trackc_prompt, without_tools


def test_sentences_naming_a_tool_are_left_out() -> None:
    """'B uses zoom here.' and the list line '- uses ping' name tools; the rest stays as written."""
    text = "A one. B uses zoom here. C three.\n- uses ping\n- keep"
    assert without_tools(text, {"zoom", "ping"}) == "A one. C three.\n- keep"


@pytest.mark.parametrize("protocol", ["harness", "paper"])
def test_brain_prompt_names_no_tool_and_no_budget(brain_case: Path, protocol: str) -> None:
    case = load_case(brain_case)
    system, task = trackc_prompt(case, protocol)
    tools = {s.name for s in viewer_kind(case.kind).registry.specs()}
    for text in (system, task):
        assert not [t for t in tools if re.search(rf"\b{re.escape(t)}\b", text)]
        assert "budget" not in text.lower() and "round" not in text.lower()
    assert "EVIDENCE:" in task and "KEY_SLICE_CORONAL_MM: <float>" in task and "ANSWER: <A|B|C|D|E|F>" in task
    assert ("Suggested steps" in task) == (protocol == "paper")  # the paper's wording under --protocol paper
