"""Runs that could not be scored do not start: Track B with VISTA3D and no bundle is refused before any episode
(and nothing is written), where before every call scored `not_configured`."""

from __future__ import annotations

from pathlib import Path

import pytest

from copilot.medflow.bench_run import RunRefused, run_batch
from copilot.tools.operation_sets import unavailable


def test_vista3d_without_a_bundle_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEDCOPILOT_VISTA3D_BUNDLE", raising=False)
    with pytest.raises(RunRefused, match="--ops vista3d needs a VISTA3D bundle"):
        run_batch(tmp_path / "cases", "prior", tmp_path / "run", track="B", ops="vista3d", progress=None)
    assert not (tmp_path / "run").exists()
    monkeypatch.setenv("MEDCOPILOT_VISTA3D_BUNDLE", str(tmp_path / "nowhere"))
    assert "needs a VISTA3D bundle" in (unavailable("vista3d") or "")
    assert unavailable("segmentation") is None and unavailable("all") is None
