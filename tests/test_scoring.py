"""Scoring exactly as Table 4 / Appendix C.1: perfect answers score 1, each single-field corruption lowers
exactly the score the paper says; hand-computed fixtures pin the geometry rules."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from copilot.bench.scoring.rules import ScoringRules
from copilot.bench.scoring.scorers import Truth
from copilot.cases.annotations import Annotation, to_geojson
from copilot.cases.brain import make_brain_case
from copilot.cases.longitudinal import make_longitudinal_case
from copilot.cases.lung import make_lung_case
from copilot.cases.pack import load_case
from copilot.cases.wsi import make_breast_case, make_lymph_case
from copilot.engine.volume.image import Volume, volume_to_sitk
from copilot.engine.volume.loading import load_volume
from copilot.medflow import score_case
from tests.oracle import deep_voxel, evidence_block, perfect_evidence, perfect_response, tumour_point


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("packs")
    return {
        "brain_A": make_brain_case(out, "brain_A", 12, spacing=3.0, label="A"),
        "brain_C": make_brain_case(out, "brain_C", 13, spacing=3.0, label="C"),
        "long_null": make_longitudinal_case(out, "long_null", 7, spacing=3.0, label="C"),
        "lung": make_lung_case(out, "lung", 20, spacing=5.0),
        "breast_N": make_breast_case(out, "breast_N", 0, size=(1024, 768), mpp=2.0, label="N"),
        "breast_DCIS": make_breast_case(out, "breast_DCIS", 5, size=(1024, 768), mpp=2.0, label="DCIS"),
        "lymph_neg": make_lymph_case(out, "lymph_neg", 0, size=(1024, 768), mpp=4.0, largest="negative"),
        "lymph_macro": make_lymph_case(out, "lymph_macro", 3, size=(1024, 768), mpp=4.0, largest="macro"),
    }


def _scores(case: Path, text: str) -> tuple[float, float, float | None]:
    s = score_case(case, text)
    return s.task, s.strict, s.loc


@pytest.mark.parametrize(
    "name", ["brain_A", "brain_C", "long_null", "lung", "breast_N", "breast_DCIS", "lymph_neg", "lymph_macro"]
)
def test_perfect_answer_scores_one(cases: dict[str, Path], name: str) -> None:
    task, strict, loc = _scores(cases[name], perfect_response(cases[name]))
    assert (task, strict) == (1.0, 1.0)
    positive = name in ("brain_A", "lung", "breast_DCIS", "lymph_macro")
    assert loc == (1.0 if positive else None)


def _mask_outside_neighbour(case: Path) -> tuple[float, float, float]:
    """RAS of a voxel just outside the mask (face-adjacent to a mask voxel)."""
    mask = load_volume(case / "hidden" / "mask.nii.gz")
    on = mask.data > 0
    for k, j, i in np.argwhere(on):
        for dk, dj, di in ((0, 0, 1), (0, 1, 0), (1, 0, 0), (0, 0, -1), (0, -1, 0), (-1, 0, 0)):
            n = (k + dk, j + dj, i + di)
            if all(0 <= n[a] < on.shape[a] for a in range(3)) and not on[n]:
                r = mask.ijk_to_ras_point(np.array([n[2], n[1], n[0]], float))
                return float(r[0]), float(r[1]), float(r[2])
    raise AssertionError("mask fills the volume")


def _extent_max(case: Path, axis: str) -> float:
    truth = Truth(load_case(case))
    m = truth.mask.ijk_to_ras
    row = "RAS".index(axis)
    return float((truth.mask_voxels @ m[row, :3] + m[row, 3]).max() + 0.5 * np.abs(m[row, :3]).sum())


def test_brain_corruptions(cases: dict[str, Path]) -> None:
    case = cases["brain_A"]
    slices, ras = perfect_evidence(case)
    assert _scores(case, f"{evidence_block(slices, ras)}ANSWER: B") == (0.0, 0.0, 1.0)  # label wrong: Task, Strict
    for axis in "SRA":  # one key slice 1 mm outside the mask extent: Strict only
        bad = dict(slices, **{axis: _extent_max(case, axis) + 1.0})
        assert _scores(case, f"{evidence_block(bad, ras)}ANSWER: A") == (1.0, 0.0, 1.0)
    outside = _mask_outside_neighbour(case)  # RAS one voxel outside the mask: Loc only (brain Strict has no RAS)
    assert _scores(case, f"{evidence_block(slices, outside)}ANSWER: A") == (1.0, 1.0, 0.0)
    assert _scores(case, "ANSWER: A") == (1.0, 0.0, 0.0)  # no evidence block
    assert _scores(case, "I think glioblastoma.") == (0.0, 0.0, 0.0)
    assert score_case(case, "nothing").parse_error


def test_lung_corruptions(cases: dict[str, Path]) -> None:
    case = cases["lung"]
    truth = json.loads((case / "hidden" / "truth.json").read_text())["answers"]
    slices, ras = perfect_evidence(case)
    good = "".join(f"{q}{truth[q]}" for q in "12345")
    wrong4 = good.replace(f"4{truth['4']}", "4E")
    assert _scores(case, evidence_block(slices, ras) + wrong4) == (0.8, 0.8, 1.0)  # partial credit kept
    bad = dict(slices, S=_extent_max(case, "S") + 1.0)
    assert _scores(case, evidence_block(bad, ras) + good) == (1.0, 0.0, 1.0)  # gate fails → Strict 0
    outside = _mask_outside_neighbour(case)
    assert _scores(case, evidence_block(slices, outside) + good) == (1.0, 0.0, 0.0)  # RAS in the gate and Loc
    assert _scores(case, good) == (1.0, 0.0, 0.0)


def test_longitudinal_corruptions(cases: dict[str, Path]) -> None:
    case = cases["long_null"]
    truth = json.loads((case / "hidden" / "truth.json").read_text())
    assert truth["fields"]["NEW_NON_TARGET_LESION"] is None  # seed 7: a field that is not scorable
    perfect = perfect_response(case)
    assert _scores(case, perfect.replace(f"ANSWER: {truth['label']}", "ANSWER: A")) == (0.0, 0.0, None)
    flipped = perfect.replace("T2_PROGRESSION: NO", "T2_PROGRESSION: YES")
    assert _scores(case, flipped) == (1.0, 0.0, None)
    unscorable = perfect.replace("NEW_NON_TARGET_LESION: NO", "NEW_NON_TARGET_LESION: YES")
    assert _scores(case, unscorable) == (1.0, 1.0, None)
    # Task is the RANO label alone: a malformed evidence field fails Strict only
    assert _scores(case, perfect.replace("T2_PROGRESSION: NO", "T2_PROGRESSION: UNKNOWN"))[:2] == (1.0, 0.0)


def _wsi(obj: dict) -> str:
    return json.dumps(obj)


def test_breast_corruptions(cases: dict[str, Path]) -> None:
    pos = cases["breast_DCIS"]
    x, y = tumour_point(pos, "DCIS")
    base = {"wsi_label": "DCIS", "localizations": [{"x": x, "y": y}]}
    assert _scores(pos, _wsi({**base, "wsi_label": "ADH"})) == (0.0, 0.0, 1.0)
    assert _scores(pos, _wsi({**base, "localizations": [{"x": 1.0, "y": 1.0}]})) == (1.0, 0.0, 0.0)
    assert _scores(pos, _wsi({**base, "localizations": [{"x": 1.0, "y": 1.0}, {"x": x, "y": y}]})) == (1.0, 1.0, 1.0)
    neg = cases["breast_N"]
    assert _scores(neg, _wsi({"wsi_label": "N", "localizations": [{"x": 5, "y": 5}]})) == (1.0, 0.0, None)
    assert _scores(neg, _wsi({"wsi_label": "N", "localizations": []})) == (1.0, 1.0, None)


def test_lymph_corruptions(cases: dict[str, Path]) -> None:
    pos = cases["lymph_macro"]
    x, y = tumour_point(pos, "Tumor")
    base = {"tumor_presence": "tumor_present", "largest_metastasis": "macro", "localizations": [{"x": x, "y": y}]}
    assert _scores(pos, _wsi(base)) == (1.0, 1.0, 1.0)
    assert _scores(pos, _wsi({**base, "largest_metastasis": "micro"})) == (0.0, 0.0, 1.0)
    assert _scores(pos, _wsi({**base, "localizations": [{"x": 1.0, "y": 1.0}]})) == (1.0, 0.0, 0.0)
    ex_x, ex_y = tumour_point(pos, "Exclusion")
    assert _scores(pos, _wsi({**base, "localizations": [{"x": ex_x, "y": ex_y}]})) == (1.0, 0.0, 0.0)
    neg = cases["lymph_neg"]
    neg_ans = {"tumor_presence": "no_tumor", "largest_metastasis": "negative"}
    assert _scores(neg, _wsi({**neg_ans, "localizations": []})) == (1.0, 1.0, None)
    assert _scores(neg, _wsi({**neg_ans, "localizations": [{"x": 3, "y": 3}]})) == (1.0, 0.0, None)


def test_metastasis_sizes_follow_clinical_definitions(cases: dict[str, Path]) -> None:
    truth = json.loads((cases["lymph_macro"] / "hidden" / "truth.json").read_text())
    assert max(truth["metastasis_diameters_mm"]) > 2.0
    assert (cases["lymph_macro"] / "hidden" / "annotations.xml").is_file()


# ----- hand-computed fixtures -----


def _fixture_case(tmp: Path, module: str, mask: Volume | None, truth: dict, anns: list | None = None) -> Path:
    case = tmp / f"fix_{module}"
    (case / "hidden").mkdir(parents=True)
    (case / "case.json").write_text(json.dumps({"case_id": case.name, "module": module, "inputs": {}}))
    (case / "hidden" / "truth.json").write_text(json.dumps(truth))
    if mask is not None:
        sitk.WriteImage(sitk.Cast(volume_to_sitk(mask), sitk.sitkUInt8), str(case / "hidden" / "mask.nii.gz"))
    if anns is not None:
        (case / "hidden" / "annotations.geojson").write_text(json.dumps(to_geojson(anns)))
    return case


def test_hand_computed_radiology_geometry(tmp_path: Path) -> None:
    """Mask voxels i=2..3, j=1, k=4 on a grid with spacing (2, 3, 5) mm and origin (10, 20, 30) RAS.

    R extent: centres 14, 16 → [13, 17]; A: centre 23 → [21.5, 24.5]; S: centre 50 → [47.5, 52.5].
    """
    m = np.diag([2.0, 3.0, 5.0, 1.0])
    m[:3, 3] = (10, 20, 30)
    data = np.zeros((6, 4, 5), np.float32)
    data[4, 1, 2:4] = 1
    mask = Volume("mask", data, m)
    case = _fixture_case(tmp_path, "brain_mri", mask, {"label": "A"})
    truth = Truth(load_case(case))
    wide = ScoringRules(key_slice_range="voxel_extent")
    for axis, lo, hi in (("R", 13.0, 17.0), ("A", 21.5, 24.5), ("S", 47.5, 52.5)):
        assert truth.slice_in_extent(axis, lo, wide) and truth.slice_in_extent(axis, hi, wide)
        assert not truth.slice_in_extent(axis, lo - 0.01, wide) and not truth.slice_in_extent(axis, hi + 0.01, wide)
    for axis, lo, hi in (("R", 14.0, 16.0), ("A", 23.0, 23.0), ("S", 50.0, 50.0)):  # the paper's reading: centres
        assert truth.slice_in_extent(axis, lo) and truth.slice_in_extent(axis, hi)
        assert not truth.slice_in_extent(axis, lo - 0.01) and not truth.slice_in_extent(axis, hi + 0.01)
    assert truth.ras_hit((14.0, 23.0, 50.0)) and truth.ras_hit((16.9, 24.4, 52.4))  # nearest voxel (3, 1, 4)
    assert not truth.ras_hit((17.1, 23.0, 50.0))  # nearest voxel i = 4
    assert not truth.ras_hit((14.0, 24.6, 50.0))  # nearest voxel j = 2
    text = evidence_block({"S": 50.0, "R": 14.0, "A": 23.0}, (15.0, 23.0, 50.0)) + "ANSWER: A"
    assert _scores(case, text) == (1.0, 1.0, 1.0)


def test_hand_computed_extent_on_an_oblique_mask(tmp_path: Path) -> None:
    """One voxel at the origin of a grid rotated 45° about S with 2 mm spacing: its R extent is ±√2 mm."""
    c = np.cos(np.pi / 4)
    m = np.eye(4)
    m[:3, :3] = np.array([[c, -c, 0], [c, c, 0], [0, 0, 1]]) @ np.diag([2.0, 2.0, 2.0])
    data = np.zeros((3, 3, 3), np.float32)
    data[0, 0, 0] = 1
    case = _fixture_case(tmp_path, "brain_mri", Volume("m", data, m), {"label": "A"})
    truth = Truth(load_case(case))
    wide = ScoringRules(key_slice_range="voxel_extent")
    assert truth.slice_in_extent("R", 2 * c * 2 / 2 - 1e-6, wide) and not truth.slice_in_extent("R", 2 * c + 0.01, wide)
    assert truth.slice_in_extent("R", 0.0) and not truth.slice_in_extent("R", 0.01)  # one voxel: its centre only


def test_hand_computed_wsi_geometry(tmp_path: Path) -> None:
    """Tumour square (0,0)-(100,100) with an Exclusion square (40,40)-(60,60) inside it."""
    square = np.array([[0, 0], [100, 0], [100, 100], [0, 100]], float)
    hole = np.array([[40, 40], [60, 40], [60, 60], [40, 60]], float)
    truth = {"tumor_presence": "tumor_present", "largest_metastasis": "micro"}
    case = _fixture_case(
        tmp_path, "lymph_node_wsi", None, truth, [Annotation("Tumor", square), Annotation("Exclusion", hole)]
    )
    ans = {**truth, "localizations": []}
    for (x, y), hit in (((10, 10), 1.0), ((100, 50), 1.0), ((50, 50), 0.0), ((40, 50), 0.0), ((100.01, 50), 0.0)):
        assert _scores(case, _wsi({**ans, "localizations": [{"x": x, "y": y}]}))[2] == hit, (x, y)
    breast = _fixture_case(
        tmp_path,
        "breast_wsi",
        None,
        {"label": "IC"},
        [Annotation("Invasive carcinoma", square), Annotation("DCIS", square + 200)],
    )
    assert _scores(breast, _wsi({"wsi_label": "IC", "localizations": [{"x": 5, "y": 5}]})) == (1.0, 1.0, 1.0)
    assert _scores(breast, _wsi({"wsi_label": "IC", "localizations": [{"x": 250, "y": 250}]})) == (1.0, 0.0, 0.0)


def test_hand_computed_brain_deep_voxel_is_inside() -> None:
    data = np.zeros((5, 5, 5), np.float32)
    data[1:4, 1:4, 1:4] = 1
    assert deep_voxel(Volume("m", data, np.eye(4))) == (2, 2, 2)


def test_hand_computed_lung_gate(tmp_path: Path) -> None:
    """A 2×2×1 lesion at voxels i=1..2, j=1..2, k=1 of a 10 mm grid at the origin: voxel centres R∈[10, 20],
    A∈[10, 20], S = 10. Four of five answers right → 0.8 when the gate holds, 0 when one key slice misses."""
    m = np.diag([10.0, 10.0, 10.0, 1.0])
    data = np.zeros((3, 4, 4), np.float32)
    data[1, 1:3, 1:3] = 1
    truth = {"answers": {"1": "A", "2": "B", "3": "A", "4": "A", "5": "C"}, "source_series": "CT"}
    case = _fixture_case(tmp_path, "lung_petct", Volume("mask", data, m), truth)
    good = {"S": 10.0, "R": 10.0, "A": 20.0}
    assert _scores(case, evidence_block(good, (20.0, 20.0, 10.0)) + "1A2B3A4A5B") == (0.8, 0.8, 1.0)
    assert _scores(case, evidence_block({**good, "S": 10.01}, (20.0, 20.0, 10.0)) + "1A2B3A4A5B") == (0.8, 0.0, 1.0)
    assert _scores(case, evidence_block(good, (26.0, 20.0, 10.0)) + "1A2B3A4A5C") == (1.0, 0.0, 0.0)
