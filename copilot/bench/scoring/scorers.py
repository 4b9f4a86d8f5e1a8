"""MedFlow scoring (Table 4 / Appendix C.1 of the paper), from a case's hidden truth and a response text.

Geometry (the benchmark's correctness depends on it):
- a key-slice offset on RAS axis X passes when it lies in the mask's RAS range along X: the range of the
  mask voxel centres' X coordinates (Table 4: "within the hidden tumor-mask RAS axis ranges"), with a
  tolerance of 0.005 mm for offsets printed to 0.01 mm (rule `key_slice_range`; `voxel_extent` widens the
  range by half a voxel, the physical extent of the outermost voxels);
- a RAS point hits when its nearest voxel (RAS→IJK, rounded) is a mask voxel > 0;
- a WSI point hits when it lies in or on a polygon of the right class and, for lymph-node slides, in
  no "Exclusion" polygon;
- lung evidence must also come from the case's source series: with a trace, the series on which the
  key slices were read and the RAS point was converted (`copilot.bench.measures.process.evidence_provenance`).
Every case keeps its parsed answer, each field's correctness and each evidence check in `details`.
A response that cannot be parsed scores 0 everywhere it is in a denominator, with the reason kept; Loc is
scored apart from the answer line ("Loc. is reported separately"): an EVIDENCE block or localizations that
parse are scored even when the answer line does not.

Not applicable is not zero: a positive slide whose truth says `evidence_scorable: false` (no
annotation of its class in the release) is scored on the answer (Strict = Task, Table 4: the gate
applies to "evidence-scored cases" / slides "with a ground-truth evidence source") and is left out
of Loc's denominator (Loc None); a lung question whose truth answer is None (`Not Collected` grade,
`Unknown` location) cannot be answered correctly: Task is #correct / 5 (Table 4), or #correct / #scorable
under the rule `lung_task_denominator=scorable`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from copilot.bench.scoring import parsers as P
from copilot.bench.scoring.rules import DEFAULT_RULES, ScoringRules
from copilot.cases.annotations import Annotation, read_geojson
from copilot.cases.answers import EVIDENCE_KEYS
from copilot.cases.bracs_classes import bracs_label
from copilot.cases.pack import CasePack
from copilot.engine.geometry import nearest_voxel
from copilot.engine.volume.image import affine_from_sitk

AXIS_INDEX = {"R": 0, "A": 1, "S": 2}
KEY_SLICE_TOL_MM = 0.005  # half the last digit of an offset printed to 0.01 mm
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

    def slice_extent(self, axis: str, widen: bool = False) -> tuple[float, float] | None:
        """The mask's RAS range along an axis: its voxel centres' range, or with `widen` the physical extent
        (centres widened by half a voxel, used for coverage: a plane through the outer half-voxel cuts it)."""
        if self.mask is None or len(self.mask_voxels) == 0:
            return None
        m = self.mask.ijk_to_ras
        row = AXIS_INDEX[axis]
        coords = self.mask_voxels @ m[row, :3] + m[row, 3]
        half = 0.5 * float(np.abs(m[row, :3]).sum()) if widen else 0.0
        return float(coords.min() - half), float(coords.max() + half)

    def slice_in_extent(self, axis: str, offset: float, rules: ScoringRules = DEFAULT_RULES) -> bool:
        """Key-slice rule: offset within the mask's RAS range along an axis (rule `key_slice_range`)."""
        extent = self.slice_extent(axis, widen=rules.key_slice_range == "voxel_extent")
        tol = KEY_SLICE_TOL_MM
        return extent is not None and bool(extent[0] - tol <= offset <= extent[1] + tol)

    def ras_hit(self, ras: tuple[float, float, float]) -> bool:
        if self.mask is None:
            return False
        vox = self.mask.nearest_voxel(np.asarray(ras, dtype=float))
        return vox is not None and bool(self.mask.data[vox[2], vox[1], vox[0]] > 0)

    def wsi_hit(self, x: float, y: float, cls: str, exclusion: bool) -> bool:
        inside = any(norm_class(a.cls) == cls and a.contains(x, y) for a in self.annotations)
        if inside and exclusion:
            inside = not any(a.cls.lower() == "exclusion" and a.contains(x, y) for a in self.annotations)
        return inside


def norm_class(name: str) -> str:
    return bracs_label(name) or name.strip()


def _field(given: Any, truth: Any) -> dict[str, Any]:
    return {"given": given, "truth": truth, "correct": given == truth}


def _slice_checks(truth: Truth, ev: P.EvidenceFields, rules: ScoringRules) -> list[dict[str, Any]]:
    """One check per key slice: the offset against the mask's RAS range along its axis (a slice whose line did
    not parse is a failed check with its problem)."""
    out: list[dict[str, Any]] = []
    for key, axis in EVIDENCE_KEYS.items():
        if axis not in ev.key_slices:
            out.append({"kind": "key_slice", "axis": axis, "value": None, "ok": False, "problem": ev.problems[key]})
            continue
        value = ev.key_slices[axis]
        lo_hi = truth.slice_extent(axis, widen=rules.key_slice_range == "voxel_extent")
        out.append({"kind": "key_slice", "axis": axis, "value": value,
                    "extent": None if lo_hi is None else [round(lo_hi[0], 4), round(lo_hi[1], 4)],
                    "ok": truth.slice_in_extent(axis, value, rules)})  # fmt: skip
    return out


def _ras_check(truth: Truth, ev: P.EvidenceFields) -> dict[str, Any]:
    if ev.ras is None:
        return {"kind": "ras", "ras": None, "voxel": None, "ok": False, "problem": ev.problems["RAS"]}
    vox = truth.mask.nearest_voxel(np.asarray(ev.ras, dtype=float)) if truth.mask is not None else None
    return {"kind": "ras", "ras": list(ev.ras), "voxel": list(vox) if vox else None, "ok": truth.ras_hit(ev.ras)}


def _series_checks(truth: Truth, provenance: dict[str, Any] | None, rules: ScoringRules) -> list[dict[str, Any]]:
    """Lung gate: key slices and RAS point taken on the designated source series (from the trace). Without a
    trace (Track C) the check cannot be made: rule `untraced_source_series` passes it (the paper scores
    runtime-agnostic answers "by the same parsers") or fails it; the check says which, and the tables mark it."""
    expected = truth.data.get("source_series")
    if not expected:
        return []
    if provenance is None:
        ok = None if rules.untraced_source_series == "pass" else False
        return [{"kind": "source_series", "item": "all", "expected": expected, "series": None, "ok": ok,
                 "unchecked": True, "rule": f"untraced_source_series={rules.untraced_source_series}",
                 "note": "no trace: provenance not checkable"}]  # fmt: skip
    return [{"kind": "source_series", "item": item, "expected": expected, "series": provenance.get(item),
             "ok": provenance.get(item) == expected} for item in ("key_slices", "ras")]  # fmt: skip


def _result(cid: str, module: str, task: float, strict: float, loc: float | None, error: str | None = None,
            answer: dict[str, Any] | None = None, fields: dict[str, Any] | None = None,
            evidence: list[dict[str, Any]] | None = None, gate: bool | None = None,
            parsed: P.EvidenceFields | None = None) -> CaseScore:  # fmt: skip
    details: dict[str, Any] = {"answer": answer or {}, "fields": fields or {}, "evidence": evidence or [],
                               "gate": gate}  # fmt: skip
    if parsed is not None:
        details["evidence_fields"] = parsed.report()  # each EVIDENCE field: parsed, with its value or problem
    unchecked = sorted({c["kind"] for c in evidence or [] if c.get("unchecked")})
    if unchecked:
        details["unchecked"] = unchecked  # gate items passed without being checked (shown in the tables)
    return CaseScore(cid, module, task, strict, loc, error, details)


def score_brain(
    truth: Truth, text: str, provenance: dict[str, Any] | None = None, rules: ScoringRules = DEFAULT_RULES
) -> CaseScore:
    cid, has_mask, gt = truth.case.case_id, len(truth.mask_voxels) > 0, truth.data["label"]
    no_mask_loc = None if rules.brain_no_tumour_loc == "excluded" else 0.0
    try:
        label = P.parse_answer_letter(text, BRAIN_LETTERS)
    except P.ParseError as exc:
        loc, evidence, ev = _ras_loc_apart(truth, text) if has_mask else (no_mask_loc, [], None)
        return _result(cid, "brain_mri", 0.0, 0.0, loc, str(exc), fields={"label": _field(None, gt)},
                       evidence=evidence, parsed=ev)  # fmt: skip
    task = float(label == gt)
    fields = {"label": _field(label, gt)}
    if not has_mask:  # no tumour: no evidence to check; Loc by rule `brain_no_tumour_loc`
        return _result(cid, "brain_mri", task, task, no_mask_loc, answer={"label": label}, fields=fields, gate=True)
    # Appendix C.1: Strict needs the three key slices; the RAS point is not in Strict and is scored as Loc
    ev = P.parse_evidence_fields(text)
    slices, ras = _slice_checks(truth, ev, rules), _ras_check(truth, ev)
    gate = all(c["ok"] for c in slices)
    answer = {"label": label, "key_slices": ev.key_slices, "ras": list(ev.ras) if ev.ras else None}
    return _result(cid, "brain_mri", task, float(task == 1.0 and gate), float(ras["ok"]), _problems(ev),
                   answer=answer, fields=fields, evidence=[*slices, ras], gate=gate, parsed=ev)  # fmt: skip


def score_longitudinal(
    truth: Truth, text: str, provenance: dict[str, Any] | None = None, rules: ScoringRules = DEFAULT_RULES
) -> CaseScore:
    """Task is the RANO label alone (Table 4); a missing or malformed evidence field fails only Strict."""
    cid, gt = truth.case.case_id, truth.data["label"]
    all_fields = dict(truth.data["fields"])
    try:
        ans = P.parse_rano_partial(text)
    except P.ParseError as exc:
        fields = {"label": _field(None, gt)}
        fields.update({k: {**_field(None, v), "scorable": v is not None} for k, v in all_fields.items()})
        for f in fields.values():
            f["correct"] = False if f.get("scorable", True) else None
        return _result(cid, "longitudinal_mri", 0.0, 0.0, None, str(exc), fields=fields, gate=False)
    task = float(ans.label == gt)
    fields = {"label": _field(ans.label, gt)}
    for key, value in all_fields.items():
        given = ans.fields.get(key)
        fields[key] = {"given": given, "truth": value, "scorable": value is not None,
                       "correct": None if value is None else given == value}  # fmt: skip
    gate = all(f["correct"] is not False for k, f in fields.items() if k != "label")
    error = f"evidence: {'; '.join(ans.problems)}" if ans.problems else None
    return _result(cid, "longitudinal_mri", task, float(task == 1.0 and gate), None, error,
                   answer={"label": ans.label, **ans.fields}, fields=fields, gate=gate)  # fmt: skip


def score_lung(
    truth: Truth, text: str, provenance: dict[str, Any] | None = None, rules: ScoringRules = DEFAULT_RULES
) -> CaseScore:
    cid, has_mask = truth.case.case_id, len(truth.mask_voxels) > 0
    expected = truth.data["answers"]
    try:
        compact = P.parse_compact_partial(text)
    except P.ParseError as exc:
        fields = {q: {**_field(None, expected.get(q)), "correct": None if expected.get(q) is None else False}
                  for q in "12345"}  # fmt: skip
        loc, evidence, parsed = _ras_loc_apart(truth, text) if has_mask else (None, [], None)
        return _result(cid, "lung_petct", 0.0, 0.0, loc, str(exc), fields=fields, evidence=evidence, gate=False,
                       parsed=parsed)  # fmt: skip
    answers = compact.answers  # each of the five subtasks on its own: an invalid letter fails that one only
    fields = {q: _field(answers.get(q), expected.get(q)) for q in "12345"}
    for q, f in fields.items():
        if q in compact.problems:
            f["problem"] = compact.problems[q]
        if f["truth"] is None:
            f["correct"] = None  # not collected: never correct; outside the denominator under `scorable`
    scorable = [f for f in fields.values() if f["correct"] is not None]
    correct = sum(bool(f["correct"]) for f in scorable)
    if rules.lung_task_denominator == "five":  # Table 4: "#correct/5"
        task = correct / len(fields)
    else:
        task = correct / len(scorable) if scorable else 0.0
    error = "; ".join(compact.problems.values()) or None
    if not has_mask:
        return _result(cid, "lung_petct", task, task, None, error, answer=answers, fields=fields, gate=True)
    # Appendix C.1: the lung gate needs all three key slices and the RAS point; Loc is the RAS point alone
    ev = P.parse_evidence_fields(text)
    ras = _ras_check(truth, ev)
    checks = [*_slice_checks(truth, ev, rules), ras, *_series_checks(truth, provenance, rules)]
    gate = all(c["ok"] is not False for c in checks)
    answer = {**answers, "key_slices": ev.key_slices, "ras": list(ev.ras) if ev.ras else None}
    error = "; ".join(p for p in (error, _problems(ev)) if p) or None
    return _result(cid, "lung_petct", task, task if gate else 0.0, float(ras["ok"]), error,
                   answer=answer, fields=fields, evidence=checks, gate=gate, parsed=ev)  # fmt: skip


def _wsi_checks(truth: Truth, points: list[tuple[float, float]], cls: str, exclusion: bool) -> list[dict[str, Any]]:
    """Each returned coordinate: hit (inside a right-class ROI), excluded (inside an Exclusion polygon)."""
    out = []
    for x, y in points:
        rois = [a.cls for a in truth.annotations if norm_class(a.cls) == cls and a.contains(x, y)]
        excluded = exclusion and any(a.cls.lower() == "exclusion" and a.contains(x, y) for a in truth.annotations)
        out.append({"kind": "wsi_point", "x": x, "y": y, "roi": rois[0] if rois else None,
                    "excluded": excluded, "ok": bool(rois) and not excluded})  # fmt: skip
    return out


def _ras_loc_apart(truth: Truth, text: str) -> tuple[float, list[dict[str, Any]], P.EvidenceFields]:
    """Loc of an answer whose answer line did not parse: the paper reports Loc separately, so the EVIDENCE
    block's RAS point is still scored against the mask (0 when the RAS line does not parse)."""
    ev = P.parse_evidence_fields(text)
    if ev.ras is None:
        return 0.0, [], ev
    check = _ras_check(truth, ev)
    return float(check["ok"]), [check], ev


def _problems(ev: P.EvidenceFields) -> str | None:
    """The evidence fields that did not parse, as a score's parse error (None when all parsed)."""
    return f"evidence: {'; '.join(ev.problems.values())}" if ev.problems else None


def _wsi_loc_apart(truth: Truth, text: str, cls: str, exclusion: bool) -> tuple[float | None, list[dict[str, Any]]]:
    """Loc of a slide answer whose labels did not parse, from its localizations alone (None when the slide's
    evidence is not scorable; 0 when the localizations do not parse either)."""
    if not truth.data.get("evidence_scorable", True):
        return None, [_unscorable(truth)]
    try:
        points = P.parse_localizations(text)
    except P.ParseError:
        return 0.0, []
    checks = _wsi_checks(truth, points, cls, exclusion)
    return float(any(c["ok"] for c in checks)), checks


def _unscorable(truth: Truth) -> dict[str, Any]:
    """The evidence check of a case whose evidence is not applicable (no ground-truth source)."""
    return {"kind": "not_applicable", "note": truth.data.get("evidence_note"), "ok": None}


def score_breast(
    truth: Truth, text: str, provenance: dict[str, Any] | None = None, rules: ScoringRules = DEFAULT_RULES
) -> CaseScore:
    cid, gt = truth.case.case_id, truth.data["label"]
    positive = gt != "N"
    try:
        ans = P.parse_bracs(text)
    except P.ParseError as exc:
        loc, evidence = _wsi_loc_apart(truth, text, gt, False) if positive else (None, [])
        return _result(cid, "breast_wsi", 0.0, 0.0, loc, str(exc), fields={"label": _field(None, gt)},
                       evidence=evidence, gate=False)  # fmt: skip
    task = float(ans.label == gt)
    fields = {"label": _field(ans.label, gt)}
    answer = {"label": ans.label, "localizations": [list(p) for p in ans.localizations]}
    if not positive:  # rule `breast_normal_localizations`: empty (default) or not required
        gate = not ans.localizations or rules.breast_normal_localizations == "not_required"
        return _result(cid, "breast_wsi", task, float(task == 1.0 and gate), None, answer=answer, fields=fields,
                       evidence=_wsi_checks(truth, ans.localizations, gt, False), gate=gate)  # fmt: skip
    if not truth.data.get("evidence_scorable", True):
        return _result(cid, "breast_wsi", task, task, None, answer=answer, fields=fields,
                       evidence=[_unscorable(truth)], gate=True)  # fmt: skip
    checks = _wsi_checks(truth, ans.localizations, gt, exclusion=False)
    hit = any(c["ok"] for c in checks)
    return _result(cid, "breast_wsi", task, float(task == 1.0 and hit), float(hit),
                   answer=answer, fields=fields, evidence=checks, gate=hit)  # fmt: skip


def score_lymph(
    truth: Truth, text: str, provenance: dict[str, Any] | None = None, rules: ScoringRules = DEFAULT_RULES
) -> CaseScore:
    cid = truth.case.case_id
    gt_p, gt_l = truth.data["tumor_presence"], truth.data["largest_metastasis"]
    positive = gt_p == "tumor_present"
    try:
        ans = P.parse_camelyon(text)
    except P.ParseError as exc:
        fields = {"tumor_presence": _field(None, gt_p), "largest_metastasis": _field(None, gt_l)}
        loc, evidence = _wsi_loc_apart(truth, text, "Tumor", True) if positive else (None, [])
        return _result(cid, "lymph_node_wsi", 0.0, 0.0, loc, str(exc), fields=fields, evidence=evidence,
                       gate=False)  # fmt: skip
    fields = {"tumor_presence": _field(ans.presence, gt_p), "largest_metastasis": _field(ans.largest, gt_l)}
    task = float(all(f["correct"] for f in fields.values()))
    answer = {"tumor_presence": ans.presence, "largest_metastasis": ans.largest,
              "localizations": [list(p) for p in ans.localizations]}  # fmt: skip
    checks = _wsi_checks(truth, ans.localizations, "Tumor", exclusion=True)
    if not positive:
        gate = not ans.localizations
        return _result(cid, "lymph_node_wsi", task, float(task == 1.0 and gate), None, answer=answer,
                       fields=fields, evidence=checks, gate=gate)  # fmt: skip
    if not truth.data.get("evidence_scorable", True):
        return _result(cid, "lymph_node_wsi", task, task, None, answer=answer, fields=fields,
                       evidence=[_unscorable(truth)], gate=True)  # fmt: skip
    hit = any(c["ok"] for c in checks)
    return _result(cid, "lymph_node_wsi", task, float(task == 1.0 and hit), float(hit),
                   answer=answer, fields=fields, evidence=checks, gate=hit)  # fmt: skip


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
