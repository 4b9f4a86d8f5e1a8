"""`medcopilot gui STUDY --prior PRIOR --screenshot F` (pytest-qt, offscreen): the prior opens beside the study as
File → Open prior study does, its alignment approved for the picture, the side-by-side layout shown, the proposal
and approval traced in the current session; a prior that cannot be opened is exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from copilot.gui import app
from tests.test_reading_room import phantom

pytestmark = pytest.mark.gui


def test_gui_prior_opens_the_prior_beside_the_study(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "sessions"))
    now = phantom(tmp_path / "now" / "head.nii.gz")
    prior = phantom(tmp_path / "prior" / "head.nii.gz", (2, 0, -1))
    shot = tmp_path / "shot.png"
    assert app.main(str(now), screenshot=str(shot), trace_dir=str(tmp_path / "t"), prior=str(prior)) == 0
    assert shot.is_file() and shot.stat().st_size > 0
    events = [json.loads(line) for line in (tmp_path / "t" / "trace.jsonl").read_text().splitlines()]
    kinds = [e["type"] for e in events]
    assert "prior_registration_proposed" in kinds and "prior_registration_approved" in kinds
    assert app.main(str(now), screenshot=str(shot), trace_dir=str(tmp_path / "t2"),
                    prior=str(tmp_path / "missing.nii.gz")) == 2  # fmt: skip
