"""Schema-driven fuzzing over real HTTP, fixed seed: radiology (Track B, every handler) and pathology handlers.

No 5xx, no dropped connection, every refusal with a code and a message, and no refusal changes the state.
`benchmarks/fuzz.py` runs the same checks for 10,000+ calls.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from copilot.medflow import make_cases
from copilot.runtime import open_session
from tests.conftest import RunningServer
from tests.schema_fuzz import Fuzzer, handler_call, hints_for

CALLS = 150  # per kind; benchmarks/fuzz.py sends 10,000+


def _fuzz(srv: RunningServer, calls: int) -> None:
    handlers = srv.client.handlers()
    fuzzer = Fuzzer(srv.client)
    hints = hints_for(srv.client)

    @seed(20260)
    @settings(
        max_examples=calls,
        database=None,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def run(data: st.DataObject) -> None:
        name, body = data.draw(handler_call(handlers, hints))
        fuzzer.send(name, body)

    run()
    s = fuzzer.stats
    assert s.calls >= calls * 0.9
    assert s.accepted > calls // 20 and s.refused > calls // 5  # both sides of the contract were exercised
    assert s.clean, (s, s.examples)


@pytest.mark.slow
def test_fuzz_radiology_track_b(brain_case: Path, tmp_path: Path) -> None:
    srv = RunningServer(open_session(brain_case, track="B", trace_dir=tmp_path / "trace"), slicer_compat=True)
    try:
        _fuzz(srv, CALLS)
    finally:
        srv.stop()


@pytest.mark.slow
def test_fuzz_pathology(tmp_path: Path) -> None:
    case = make_cases("breast_wsi", 1, 5, tmp_path / "cases", slide_size=(1024, 768), mpp=1.0)[0]
    srv = RunningServer(open_session(case, track="B", trace_dir=tmp_path / "trace"))
    try:
        _fuzz(srv, CALLS)
    finally:
        srv.stop()
