"""MedFlow scoring (Table 4 / Appendix C.1 of the paper), from a case's hidden truth and a response text.

Geometry (the benchmark's correctness depends on it):
- a key-slice offset on RAS axis X passes when it lies in the mask's physical extent along X: the
  voxel centres' X range widened by half a voxel's extent along X;
- a RAS point hits when its nearest voxel (RAS→IJK, rounded) is a mask voxel > 0;
- a WSI point hits when it lies in or on a polygon of the right class and, for lymph-node slides, in
  no "Exclusion" polygon.
A response that cannot be parsed scores 0 everywhere it is in a denominator, with the reason kept.

Not applicable is not zero: a positive slide whose truth says `evidence_scorable: false` (no
annotation of its class in the release) is scored on the answer (Strict = Task, Table 4: the gate
applies to "evidence-scored cases" / slides "with a ground-truth evidence source") and is left out
of Loc's denominator (Loc None); a lung question whose truth answer is None (`Not Collected` grade,
`Unknown` location) is left out of Task's denominator (#correct / #scorable).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from copilot.bench import parsers as P
from copilot.cases.annotations import Annotation, read_geojson
from copilot.cases.bracs_classes import bracs_label
from copilot.cases.pack import CasePack
from copilot.engine.geometry import nearest_voxel
from copilot.engine.volume import affine_from_sitk

AXIS_INDEX = {"R": 0, "A": 1, "S": 2}
BRAIN_LETTERS = "ABCDEF"
RANO_LETTERS = "ABCD"


@dataclass
class CaseScore:
    case_id: str
    module: str
    task: float
    strict: float
    loc: float | None
    parse_error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class MaskGrid:
    """A hidden mask as stored (integer voxels, no float copy) with its IJK→RAS matrix."""

    def __init__(self, data: np.ndarray, ijk_to_ras: np.ndarray) -> None:
        self.data = data
        self.ijk_to_ras = ijk_to_ras
        self.ras_to_ijk = np.linalg.inv(ijk_to_ras)

    @classmethod
    def read(cls, path: Path) -> MaskGrid:
        image = sitk.ReadImage(str(path))
        return cls(sitk.GetArrayFromImage(image), affine_from_sitk(image))

    def nearest_voxel(self, ras: np.ndarray) -> tuple[int, int, int] | None:
        k, j, i = self.data.shape
        return nearest_voxel(self.ras_to_ijk, ras, (i, j, k))


class Truth:
    """Hidden ground truth of one case, loaded lazily (scoring code only; no handler can reach it)."""

    def __init__(self, case: CasePack) -> None:
        self.case = case
        self.hidden = case.root / "hidden"
        self.data: dict[str, Any] = json.loads((self.hidden / "truth.json").read_text(encoding="utf-8"))

    @cached_property
    def mask(self) -> MaskGrid | None:
        path = self.hidden / "mask.nii.gz"
        return MaskGrid.read(path) if path.is_file() else None

    @cached_property
    def mask_voxels(self) -> np.ndarray:
        """IJK (i, j, k) of every mask voxel > 0 (searched only inside the mask's bounding box)."""
        if self.mask is None:
            return np.zeros((0, 3), dtype=int)
        on = self.mask.data > 0
        ranges = [np.flatnonzero(on.any(axis=axes)) for axes in ((1, 2), (0, 2), (0, 1))]
        if any(len(r) == 0 for r in ranges):
            return np.zeros((0, 3), dtype=int)
        lo = [int(r[0]) for r in ranges]
        box = on[lo[0] : ranges[0][-1] + 1, lo[1] : ranges[1][-1] + 1, lo[2] : ranges[2][-1] + 1]
        return (np.argwhere(box) + np.array(lo))[:, ::-1]

    @cached_property
    def annotations(self) -> list[Annotation]:
        path = self.hidden / "annotations.geojson"
        return read_geojson(path) if path.is_file() else []

    def slice_in_extent(self, axis: str, offset: float) -> bool:
        """Key-slice rule: offset within the mask's physical extent along a RAS axis."""
        if self.mask is None or len(self.mask_voxels) == 0:
            return False
        m = self.mask.ijk_to_ras
        row = AXIS_INDEX[axis]
        coords = self.mask_voxels @ m[row, :3] + m[row, 3]
        half = 0.5 * float(np.abs(m[row, :3]).sum())
        return bool(coords.min() - half - 1e-9 <= offset <= coords.max() + half + 1e-9)

    def ras_hit(self, ras: tuple[float, float, float]) -> bool:
        if self.mask is None:
            return False
        vox = self.mask.nearest_voxel(np.asarray(ras, dtype=float))
        return vox is not None and bool(self.mask.data[vox[2], vox[1], vox[0]] > 0)

    def wsi_hit(self, x: float, y: float, cls: str, exclusion: bool) -> bool:
        inside = any(_norm_class(a.cls) == cls and a.contains(x, y) for a in self.annotations)
        if inside and exclusion:
            inside = not any(a.cls.lower() == "exclusion" and a.contains(x, y) for a in self.annotations)
        return inside


def _norm_class(name: str) -> str:
    return bracs_label(name) or name.strip()


def _evidence_checks(truth: Truth, ev: P.Evidence) -> dict[str, Any]:
    slices = {axis: truth.slice_in_extent(axis, value) for axis, value in ev.key_slices.items()}
    return {"key_slices_ok": slices, "ras_hit": truth.ras_hit(ev.ras)}


def score_brain(truth: Truth, text: str) -> CaseScore:
    cid, has_mask = truth.case.case_id, len(truth.mask_voxels) > 0
    try:
        label = P.parse_answer_letter(text, BRAIN_LETTERS)
    except P.ParseError as exc:
        return CaseScore(cid, "brain_mri", 0.0, 0.0, 0.0 if has_mask else None, str(exc))
    task = float(label == truth.data["label"])
    if not has_mask:  # no tumour: there is no evidence to check
        return CaseScore(cid, "brain_mri", task, task, None, details={"label": label})
    try:
        ev = P.parse_evidence(text)
    except P.ParseError as exc:
        return CaseScore(cid, "brain_mri", task, 0.0, 0.0, f"evidence: {exc}", {"label": label})
    checks = _evidence_checks(truth, ev)
    strict = float(task == 1.0 and all(checks["key_slices_ok"].values()))
    return CaseScore(cid, "brain_mri", task, strict, float(checks["ras_hit"]), details={"label": label, **checks})


def score_longitudinal(truth: Truth, text: str) -> CaseScore:
    cid = truth.case.case_id
    try:
        ans = P.parse_rano(text)
    except P.ParseError as exc:
        return CaseScore(cid, "longitudinal_mri", 0.0, 0.0, None, str(exc))
    task = float(ans.label == truth.data["label"])
    scorable = {k: v for k, v in truth.data["fields"].items() if v is not None}
    wrong = [k for k, v in scorable.items() if ans.fields.get(k) != v]
    strict = float(task == 1.0 and not wrong)
    return CaseScore(cid, "longitudinal_mri", task, strict, None, details={"label": ans.label, "wrong_fields": wrong})


def score_lung(truth: Truth, text: str) -> CaseScore:
    cid, has_mask = truth.case.case_id, len(truth.mask_voxels) > 0
    try:
        answers = P.parse_compact(text)
    except P.ParseError as exc:
        return CaseScore(cid, "lung_petct", 0.0, 0.0, 0.0 if has_mask else None, str(exc))
    expected = truth.data["answers"]
    scorable = [q for q in "12345" if expected.get(q) is not None]
    correct = sum(answers[q] == expected[q] for q in scorable)
    task = correct / len(scorable) if scorable else 0.0
    if not has_mask:
        return CaseScore(cid, "lung_petct", task, task, None, details={"answers": answers})
    try:
        ev = P.parse_evidence(text)
    except P.ParseError as exc:
        return CaseScore(cid, "lung_petct", task, 0.0, 0.0, f"evidence: {exc}", {"answers": answers})
    checks = _evidence_checks(truth, ev)
    gate = all(checks["key_slices_ok"].values()) and checks["ras_hit"]
    return CaseScore(cid, "lung_petct", task, task if gate else 0.0, float(checks["ras_hit"]),
                     details={"answers": answers, "correct": correct, **checks})  # fmt: skip


def _unscorable(truth: Truth) -> dict[str, Any]:
    """Details of a case whose evidence is not applicable (no ground-truth source)."""
    return {"evidence": "not applicable", "evidence_note": truth.data.get("evidence_note")}


def score_breast(truth: Truth, text: str) -> CaseScore:
    cid, gt = truth.case.case_id, truth.data["label"]
    positive = gt != "N"
    try:
        ans = P.parse_bracs(text)
    except P.ParseError as exc:
        return CaseScore(cid, "breast_wsi", 0.0, 0.0, 0.0 if positive else None, str(exc))
    task = float(ans.label == gt)
    if not positive:
        return CaseScore(cid, "breast_wsi", task, float(task == 1.0 and not ans.localizations), None,
                         details={"label": ans.label, "n_points": len(ans.localizations)})  # fmt: skip
    if not truth.data.get("evidence_scorable", True):
        return CaseScore(cid, "breast_wsi", task, task, None, details={"label": ans.label, **_unscorable(truth)})
    hit = any(truth.wsi_hit(x, y, gt, exclusion=False) for x, y in ans.localizations)
    return CaseScore(cid, "breast_wsi", task, float(task == 1.0 and hit), float(hit),
                     details={"label": ans.label, "hit": hit})  # fmt: skip


def score_lymph(truth: Truth, text: str) -> CaseScore:
    cid = truth.case.case_id
    positive = truth.data["tumor_presence"] == "tumor_present"
    try:
        ans = P.parse_camelyon(text)
    except P.ParseError as exc:
        return CaseScore(cid, "lymph_node_wsi", 0.0, 0.0, 0.0 if positive else None, str(exc))
    task = float(ans.presence == truth.data["tumor_presence"] and ans.largest == truth.data["largest_metastasis"])
    if not positive:
        return CaseScore(cid, "lymph_node_wsi", task, float(task == 1.0 and not ans.localizations), None,
                         details={"n_points": len(ans.localizations)})  # fmt: skip
    if not truth.data.get("evidence_scorable", True):
        return CaseScore(cid, "lymph_node_wsi", task, task, None, details=_unscorable(truth))
    hit = any(truth.wsi_hit(x, y, "Tumor", exclusion=True) for x, y in ans.localizations)
    return CaseScore(cid, "lymph_node_wsi", task, float(task == 1.0 and hit), float(hit), details={"hit": hit})


def summarise(scores: list[CaseScore]) -> dict[str, dict[str, Any]]:
    """Per module: n, mean Task, mean Strict, mean Loc over the cases in its denominator (None if none)."""
    out: dict[str, dict[str, Any]] = {}
    for module in sorted({s.module for s in scores}):
        rows = [s for s in scores if s.module == module]
        locs = [s.loc for s in rows if s.loc is not None]
        out[module] = {
            "n": len(rows),
            "task": round(sum(s.task for s in rows) / len(rows), 6),
            "strict": round(sum(s.strict for s in rows) / len(rows), 6),
            "loc": round(sum(locs) / len(locs), 6) if locs else None,
            "parse_errors": sum(s.parse_error is not None for s in rows),
        }
    return out
