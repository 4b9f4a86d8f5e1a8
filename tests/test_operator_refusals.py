"""An operator whose library refuses the inputs answers with a named refusal that changes nothing, not a 500."""

from __future__ import annotations

from pathlib import Path

from copilot.runtime import open_session


def test_a_registration_itk_cannot_run_is_a_named_refusal(brain_case: Path) -> None:
    session = open_session(brain_case, track="B")
    before = session.snapshot()
    out = session.call("register_volumes", {
        "fixed_volume": "T2", "moving_volume": "FLAIR", "output_transform": "t", "sampling_percentage": 1e-300,
        "max_iterations": 5, "size": 64,
    })  # fmt: skip
    assert out.status == 422 and out.error is not None and out.error["code"] == "registration_failed"
    assert "1 or more points" in out.error["message"] and session.snapshot() == before
