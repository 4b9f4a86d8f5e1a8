"""Failure labels and checkpoints from trace facts: identical under the `harness` and `paper` protocols for the
same calls; workflow faults recomputed from recorded calls (hand-made events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from copilot.bench.measures.trace_facts import radiology_faults, reactions, slide_faults
from copilot.cases.lung import make_lung_case
from copilot.medflow.bench_run import run_batch
from tests.oracle import evidence_block, perfect_evidence


def call(seq: int, handler: str, result: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "handler_call", "actor": "agent", "seq": seq, "ok": True, "handler": handler, "args": {},
            "result": result or {}, **extra}  # fmt: skip


def plane(axis: str, offset: float, volume: str = "CT") -> dict[str, Any]:
    view = {"axis": axis, "offset": offset, "center_ras": [0.0, 0.0, offset], "fov_mm": [200.0, 200.0]}
    return {"images": [{"view": "red"}], "state": {"views": {"red": view}, "active_volume_name": volume}}


def test_radiology_faults_from_recorded_calls() -> None:
    """Source series CT. seq 1 shows S = 10 on CT. seq 2 records a key slice S = 10 on CT: no fault. seq 3 records
    S = 30 on PET: off_source_series and unobserved_evidence (S 30 never shown). seq 4 converts a point on PET:
    off_source_series. seq 5 fuses vol1 (frame A) with vol2 (frame B): unregistered_fusion. seq 6 applies a
    transform to vol2 onto vol1 → vol3 (frame A, supersedes vol2). seq 7 fuses vol1 with vol3: nothing; seq 8
    fuses vol1 with vol2 again: unregistered_fusion and superseded_node."""
    volumes = {"volumes": [{"id": "vol1", "name": "CT"}, {"id": "vol2", "name": "PET"}]}
    fuse = lambda seq, fg: call(seq, "fusion", {"background_volume": "vol1", "foreground_volume": fg})  # noqa: E731
    events = [
        {**call(1, "observe"), **plane("S", 10.0)},
        call(2, "record_key_slice", {"evidence": {"axis": "S", "offset_mm": 10.0, "volume": "CT"}}),
        call(3, "record_key_slice", {"evidence": {"axis": "S", "offset_mm": 30.0, "volume": "PET"}}),
        call(4, "image_coords_to_ras", {"ras": [0, 0, 10], "volume": "PET"}),
        {**fuse(5, "vol2"), "state": volumes},
        call(6, "apply_transform", {"volume_id": "vol3", "provenance": {"operator": "apply_transform",
                                                                         "source": "vol2", "reference": "vol1"}}),
        fuse(7, "vol3"),
        fuse(8, "vol2"),
    ]  # fmt: skip
    got = [(f["seq"], f["code"]) for f in radiology_faults(events, "CT", {"CT": "A", "PET": "B"})]
    assert got == [(3, "off_source_series"), (3, "unobserved_evidence"), (4, "off_source_series"),
                   (5, "unregistered_fusion"), (8, "unregistered_fusion"), (8, "superseded_node")]  # fmt: skip


def test_slide_faults_from_recorded_calls() -> None:
    """A screenshot of region (0, 0)–(100, 100) at downsample 4 (seq 1). seq 2 converts (50, 50) at downsample 4
    in that viewport: no fault. seq 3 converts (500, 500) after the view moved (region (400, 400)–(600, 600),
    no screenshot): unobserved_evidence and stale_view. seq 4 records at 2.5× (< 5×) in the shown viewport:
    low_magnification_evidence only."""
    shown = {"image": "s", "visible_region": [0, 0, 100, 100], "downsample": 4.0, "viewer_size": [10, 10],
             "image_open": True, "magnification": 2.5, "center": [50, 50]}  # fmt: skip
    moved = {**shown, "visible_region": [400, 400, 600, 600], "center": [500, 500]}
    events = [
        call(1, "capture_viewer", images=[{"view": "viewer"}], state=shown),
        call(2, "viewer_point_to_wsi_coordinate", {"x": 50, "y": 50}, state=shown),
        call(3, "viewer_point_to_wsi_coordinate", {"x": 500, "y": 500}, state=moved),
        call(4, "record_view_evidence", {"evidence": {"kind": "view"}}, state=shown),
    ]
    got = [(f["seq"], f["code"]) for f in slide_faults(events, 5.0)]
    assert got == [(3, "unobserved_evidence"), (3, "stale_view"), (4, "low_magnification_evidence")]


def test_reactions_to_faults() -> None:
    """A fault at seq 2 (record_point): the next call differs (depth 2) and a later record_point has no fault of
    that code (depth 3). A fault at seq 4 followed by the very same call: depth 1."""
    events = [call(1, "observe"), call(2, "record_point"), call(3, "observe"), call(4, "record_point"),
              call(5, "record_point")]  # fmt: skip
    faults = [{"seq": 2, "code": "unobserved_evidence"}, {"seq": 4, "code": "unobserved_evidence"}]
    assert [r["depth"] for r in reactions(events, faults)] == [3, 1]


@pytest.fixture(scope="module")
def lung_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """One script with only the paper's tools, reading the evidence off the PET (the source series is the CT),
    run under both protocols."""
    tmp = tmp_path_factory.mktemp("offsource")
    lung = make_lung_case(tmp / "packs", "lung", 20, spacing=6.0)
    slices, ras = perfect_evidence(lung)
    truth = json.loads((lung / "hidden" / "truth.json").read_text())["answers"]
    answer = "Rationale.\n" + evidence_block(slices, ras) + "".join(f"{q}{truth[q]}" for q in "12345")
    calls = [
        {"handler": "select_volume", "args": {"volume_name": "PET_AC", "size": 64}},
        {"handler": "jump", "args": {"ras": list(ras), "size": 64}},
        {"handler": "image_coords_to_ras", "args": {"view": "red", "point_1000": [500, 500]}},
    ]
    script = tmp / "offsource.json"
    script.write_text(json.dumps({"calls": calls, "answer": answer}))
    out = {}
    for protocol in ("harness", "paper"):
        (row,) = run_batch(lung, f"scripted:{script}", tmp / "run", progress=None, protocol=protocol)
        out[protocol] = row
    return out


def test_off_source_lung_trace_labels_alike_under_both_protocols(lung_runs: dict[str, dict[str, Any]]) -> None:
    """Strict 0 under both (the evidence is off the source series). The harness run's guard warned, the paper
    run's did not; yet both carry F3 at the conversion, D4 FAIL, and the same checkpoints and S (before, the
    paper run had no F3, D4 PASS and S 0.885 against the harness run's 0.679). By hand, weight × value:
    P1 1×0.5 (a selection first), A1 2×1, A2 2×1, A3 1×1 (cited evidence all shown), D1 2×1, D2 2×1, D4 2×0,
    R1 1×1, R2 1×0 (the faulty call was the last); A4 and D3 SKIP (no refused call, no size stated).
    S = 10.5 / 14 = 0.75."""
    harness, paper = lung_runs["harness"]["process"], lung_runs["paper"]["process"]
    assert lung_runs["harness"]["strict"] == lung_runs["paper"]["strict"] == 0.0
    assert harness["workflow_guards"].get("off_source_series") == 1 and paper["workflow_guards"] == {}
    assert harness["failures"] == paper["failures"] and "F3" in [f["code"] for f in paper["failures"]]
    items = {c["id"]: c["status"] for c in paper["checkpoints"]["items"]}
    assert (items["D4"], items["A3"], items["A4"], items["D3"]) == ("FAIL", "PASS", "SKIP", "SKIP")
    assert harness["checkpoints"] == paper["checkpoints"] and paper["checkpoints"]["S"] == pytest.approx(0.75)
    assert harness["r6"] == paper["r6"] and harness["stage_path"] == paper["stage_path"]
    assert Path(lung_runs["paper"]["trace_dir"]).parts[0] == "episodes"


def test_milestones_from_faults() -> None:
    """register (seq 1) → apply_transform (2) → fusion with a foreground (3): all three milestones; with an
    unregistered_fusion fault on seq 3 (with or without a guard warning) the last one is not reached."""
    from copilot.bench.measures.dimensions import milestones

    fusion = {**call(3, "fusion"), "args": {"foreground_volume_ref": "vol3"}}
    events = [call(1, "register_volumes"), call(2, "apply_transform"), fusion]
    assert milestones(events, []) == ["register", "resample/apply", "registered fusion"]
    assert milestones(events, [{"seq": 3, "code": "unregistered_fusion"}]) == ["register", "resample/apply"]
