"""A Track B trace with `register_volumes` replays bit for bit, again and again, on both backends."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from copilot.medflow import make_cases
from copilot.replay import replay
from copilot.runtime import open_session

REPLAYS = 5


@pytest.fixture(scope="module")
def longitudinal_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small two-timepoint MRI case (4 mm voxels: registration takes well under a second)."""
    return make_cases("longitudinal_mri", 1, 3, tmp_path_factory.mktemp("long"), spacing=4.0)[0]


@pytest.mark.parametrize("backend", ["embedded", "slicer"])
def test_register_volumes_replays_every_time(longitudinal_case: Path, tmp_path: Path, backend: str) -> None:
    if backend == "slicer" and importlib.util.find_spec("slicer_core") is None:
        pytest.skip("slicer-core is not installed")
    trace = tmp_path / "trace"
    session = open_session(longitudinal_case, track="B", trace_dir=trace, backend=backend)
    volumes = {v["name"]: v["id"] for v in session.snapshot()["volumes"]}
    common = {"fixed_volume": volumes["CURRENT_T1"], "max_iterations": 60, "size": 96}
    for moving, output in (("OLD_T1", "T"), ("OLD_FLAIR", "F")):
        out = session.call("register_volumes", {**common, "moving_volume": volumes[moving], "output_transform": output})
        assert out.ok, out.error
    session.close()
    reports = [replay(trace) for _ in range(REPLAYS)]
    assert [r.summary() for r in reports if not r.ok] == []
    assert sum(r.ok for r in reports) == REPLAYS
    assert reports[0].calls == 3  # the case's own opening and both registrations
