"""A viewer kind's benchmark facts are fields of its descriptor: the workflow audit's checkpoints and claim
boundaries, and the Track C drawer, are read from the kind, so a kind that declares its own gets them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from copilot.bench.measures.workflow_audit import checkpoint_results, claim_violations, common_checkpoints
from copilot.bench.report.montage import write_montages
from copilot.kinds import RADIOLOGY_KIND, Checkpoint, kinds

CTX: dict[str, Any] = {"calls": [], "reactions": [], "coverage": None, "parse_error": None, "cited_items": 0,
                       "unobserved": 0, "quantities": 0, "f2": False, "verification": None}  # fmt: skip


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind declaring one checkpoint of its own and only the certainty boundary, present for one test."""
    kind = dataclasses.replace(
        RADIOLOGY_KIND,
        name="toy_audit",
        checkpoints=(Checkpoint("A9", "the toy target was shown", True, "target_seen"),),
        claim_boundaries=("certainty_beyond_evidence",),
    )
    monkeypatch.setitem(kinds(), "toy_audit", kind)


def test_checkpoints_come_from_the_kind(toy: None) -> None:
    ids = [c["id"] for c in checkpoint_results("undeclared_module", CTX, "toy_audit")]
    assert "A9" in ids and "A2" not in ids  # the kind's own, not radiology's
    assert set(ids) == {c.id for c in common_checkpoints()} | {"A9"}
    a9 = next(c for c in checkpoint_results("undeclared_module", CTX, "toy_audit") if c["id"] == "A9")
    assert (a9["critical"], a9["status"]) == (True, "SKIP")  # no coverage: the target rule's skip condition
    radiology = [c["id"] for c in checkpoint_results("undeclared_module", CTX, "radiology")]
    assert "A2" in radiology and "A9" not in radiology
    unknown = [c["id"] for c in checkpoint_results("undeclared_module", CTX, "no_such_kind")]
    assert set(unknown) == {c.id for c in common_checkpoints()}  # an undeclared kind: the common ones only


def test_claim_boundaries_come_from_the_kind(toy: None) -> None:
    text = "The lesion is certainly 3 cm and seen on FLAIR."
    claims = claim_violations("toy_audit", text, [], ["3 cm"], ["FLAIR"])
    assert claims == [{"boundary": "certainty_beyond_evidence", "claim": "certainly"}]  # only its one boundary
    radiology = {c["boundary"] for c in claim_violations("radiology", text, [], ["3 cm"], ["FLAIR"])}
    assert radiology == {"measurement_not_taken", "series_not_shown", "certainty_beyond_evidence"}
    assert claim_violations("no_such_kind", text, [], ["3 cm"], ["FLAIR"]) == []


def _pack(root: Path) -> Path:
    root.mkdir()
    (root / "case.json").write_text(json.dumps({"case_id": "toy_001", "module": "toy", "inputs": {}}))
    return root


def test_track_c_pictures_are_drawn_by_the_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[str] = []

    def draw(case: Any) -> dict[str, Image.Image]:
        drawn.append(case.case_id)
        return {"first": Image.new("L", (4, 3), 7), "second": Image.new("RGB", (2, 2))}

    monkeypatch.setitem(kinds(), "radiology", dataclasses.replace(RADIOLOGY_KIND, montage=draw))
    written = write_montages(_pack(tmp_path / "case"), tmp_path / "out")
    assert drawn == ["toy_001"] and [p.name for p in written] == ["first.png", "second.png"]
    assert Image.open(written[0]).size == (4, 3)
    listed = json.loads((tmp_path / "out" / "toy_001" / "montage.json").read_text())["images"]
    assert listed == ["first.png", "second.png"]

    monkeypatch.setitem(kinds(), "radiology", dataclasses.replace(RADIOLOGY_KIND, montage=None))
    with pytest.raises(ValueError, match="no Track C montage for radiology cases"):
        write_montages(tmp_path / "case", tmp_path / "out2")
