"""Each EVIDENCE field scored on its own (paper Appendix C.1): key slices for Strict, the RAS point for Loc,
lung's five subtasks one by one; the field-level parse result in `bench score --json`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from copilot.bench.scoring.parsers import parse_compact_partial, parse_evidence_fields
from copilot.cases.pack import load_case
from copilot.engine.volume.image import Volume, volume_to_sitk
from copilot.medflow import score_case
from copilot.medflow.score_cli import AnswerFile, report_json, score_answers


def _case(tmp: Path, module: str, truth: dict) -> Path:
    """A 2×2×1 mask at voxels i=1..2, j=1..2, k=1 of a 10 mm grid at the origin: voxel centres R∈[10, 20],
    A∈[10, 20], S = 10."""
    case = tmp / f"fix_{module}"
    (case / "hidden").mkdir(parents=True)
    (case / "case.json").write_text(json.dumps({"case_id": case.name, "module": module, "inputs": {}}))
    (case / "hidden" / "truth.json").write_text(json.dumps(truth))
    data = np.zeros((3, 4, 4), np.float32)
    data[1, 1:3, 1:3] = 1
    mask = volume_to_sitk(Volume("mask", data, np.diag([10.0, 10.0, 10.0, 1.0])))
    sitk.WriteImage(sitk.Cast(mask, sitk.sitkUInt8), str(case / "hidden" / "mask.nii.gz"))
    return case


SLICES = "EVIDENCE:\nKEY_SLICE_AXIAL_MM: 10\nKEY_SLICE_SAGITTAL_MM: 15\nKEY_SLICE_CORONAL_MM: 20\n"
LUNG_TRUTH = {"answers": {"1": "A", "2": "B", "3": "A", "4": "A", "5": "C"}}


def test_brain_slices_without_ras_keep_strict(tmp_path: Path) -> None:
    """Three key slices S 10 ∈ [10, 10], R 15 ∈ [10, 20], A 20 ∈ [10, 20], no RAS line, label right:
    Task 1, Strict 1 (the RAS point is not part of Strict), Loc 0 (no point). Before: Strict 0."""
    case = _case(tmp_path, "brain_mri", {"label": "A"})
    s = score_case(case, SLICES + "ANSWER: A")
    assert (s.task, s.strict, s.loc) == (1.0, 1.0, 0.0)
    fields = s.details["evidence_fields"]
    assert fields["KEY_SLICE_AXIAL_MM"] == {"parsed": True, "value": 10.0}
    assert fields["RAS"] == {"parsed": False, "problem": "missing RAS: [R, A, S]"}
    assert s.parse_error == "evidence: missing RAS: [R, A, S]"


def test_brain_ras_inside_with_a_slice_missing_keeps_loc(tmp_path: Path) -> None:
    """RAS (20, 20, 10): nearest voxel (2, 2, 1), a mask voxel → Loc 1; the coronal slice is missing → Strict 0
    (two of three key slices do not make the gate). Before: Loc 0."""
    case = _case(tmp_path, "brain_mri", {"label": "A"})
    text = "EVIDENCE:\nKEY_SLICE_AXIAL_MM: 10\nKEY_SLICE_SAGITTAL_MM: 15\nRAS: [20, 20, 10]\nANSWER: A"
    s = score_case(case, text)
    assert (s.task, s.strict, s.loc) == (1.0, 0.0, 1.0)
    coronal = next(c for c in s.details["evidence"] if c.get("axis") == "A")
    assert coronal["ok"] is False and coronal["problem"] == "missing KEY_SLICE_CORONAL_MM"
    assert s.details["evidence_fields"]["RAS"] == {"parsed": True, "value": [20.0, 20.0, 10.0]}


def test_lung_loc_from_the_ras_point_alone(tmp_path: Path) -> None:
    """Lung, four of five subtasks right (Q5 B ≠ C) → Task 4/5 = 0.8; RAS (10, 10, 10) inside, the axial slice
    missing: the gate needs all three slices → Strict 0, Loc 1. Before: Loc 0."""
    case = _case(tmp_path, "lung_petct", LUNG_TRUTH)
    text = "EVIDENCE:\nKEY_SLICE_SAGITTAL_MM: 15\nKEY_SLICE_CORONAL_MM: 20\nRAS: [10, 10, 10]\n1A2B3A4A5B"
    s = score_case(case, text)
    assert (s.task, s.strict, s.loc) == (0.8, 0.0, 1.0)


def test_lung_subtasks_scored_one_by_one(tmp_path: Path) -> None:
    """Q2 answered 'Z' (not an option): that subtask fails alone; Q1, Q3, Q4, Q5 right → Task 4/5 = 0.8, and with
    the full evidence (slices in range, RAS (20, 20, 10) inside) Strict = Task = 0.8, Loc 1. Before: all 0."""
    case = _case(tmp_path, "lung_petct", LUNG_TRUTH)
    s = score_case(case, SLICES + "RAS: [20, 20, 10]\n1A2Z3A4A5C")
    assert (s.task, s.strict, s.loc) == (0.8, 0.8, 1.0)
    assert s.details["fields"]["2"] == {"given": None, "truth": "B", "correct": False,
                                        "problem": "question 2: Z is not an option"}  # fmt: skip
    assert parse_compact_partial("1a 2b 3c 4d 5e").answers == {"1": "A", "2": "B", "3": "C", "4": "D", "5": "E"}


def test_field_parse_rules() -> None:
    """Two EVIDENCE blocks: every field unparsed; a duplicated RAS with two values: RAS unparsed only."""
    two = parse_evidence_fields(SLICES + "RAS: [1, 2, 3]\n" + SLICES)
    assert two.key_slices == {} and two.ras is None and set(two.problems) == {
        "KEY_SLICE_AXIAL_MM", "KEY_SLICE_SAGITTAL_MM", "KEY_SLICE_CORONAL_MM", "RAS"}  # fmt: skip
    dup = parse_evidence_fields(SLICES + "RAS: [1, 2, 3]\nRAS: [4, 5, 6]")
    assert dup.key_slices == {"S": 10.0, "R": 15.0, "A": 20.0} and dup.ras is None
    assert dup.problems == {"RAS": "RAS is given more than once with different values"}


def test_bench_score_json_carries_the_field_parse(tmp_path: Path) -> None:
    """`bench score --json`: each case's details hold `evidence_fields`, one entry per EVIDENCE field."""
    case = load_case(_case(tmp_path, "brain_mri", {"label": "A"}))
    scores = score_answers([case], AnswerFile({case.case_id: SLICES + "ANSWER: A"}))
    out = report_json(scores, AnswerFile({case.case_id: ""}), [case])
    fields = out["cases"][0]["details"]["evidence_fields"]
    assert [k for k, v in fields.items() if v["parsed"]] == [
        "KEY_SLICE_AXIAL_MM", "KEY_SLICE_SAGITTAL_MM", "KEY_SLICE_CORONAL_MM"]  # fmt: skip
    assert out["summary"]["brain_mri"]["strict"] == 1.0


def test_process_measures_read_the_fields_that_parse() -> None:
    """Cited evidence is field by field too: three key slices without a RAS line are three cited items (D2, F5
    and E see them; before, nothing was cited), none of them on a view when nothing was shown."""
    from copilot.bench.measures.failures import unobserved_items
    from copilot.bench.scoring.parsers import cited_evidence

    cited = cited_evidence(SLICES + "ANSWER: A", "brain_mri")
    assert cited == {"key_slices": {"S": 10.0, "R": 15.0, "A": 20.0}, "ras": None}
    assert unobserved_items([], cited) == ["KEY_SLICE_S", "KEY_SLICE_R", "KEY_SLICE_A"]
    assert cited_evidence("ANSWER: A", "brain_mri") == {}
