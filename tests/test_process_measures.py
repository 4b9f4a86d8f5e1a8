"""The process measures of the related benchmarks on small hand-made fixtures, with the arithmetic shown:
ACP-Bench's S, sweep, CWAS-3 and R6 (seed 000), MedHarnessBench's seven dimensions and Pass@3 (seed 001),
PathAgentBench's hierarchical hits and random baseline (seed 003), and the intervention funnel."""

from __future__ import annotations

from typing import Any

import pytest

from copilot.bench.measures import dimensions as D
from copilot.bench.measures import workflow_audit as W
from copilot.bench.measures.exploration import Region, hit_rates, level_hits, random_baseline, retain
from copilot.bench.measures.perturb import fault_statistics

# ----- fixtures -----


def plane_call(seq: int, handler: str, offset: float, ok: bool = True, images: bool = True, **extra: Any) -> dict:
    """An agent call whose state shows the red view (axial, S) at `offset` on FLAIR; images when `images`."""
    state = {
        "views": {"red": {"axis": "S", "offset": offset, "center_ras": [0.0, 0.0, offset], "fov_mm": [200, 200]}},
        "active_volume_name": "FLAIR",
        "background_volume": "v1",
    }
    return {"type": "handler_call", "actor": "agent", "seq": seq, "handler": handler, "ok": ok, "args": extra,
            "state": state, "images": [{"view": "red"}] if images else [], "result": {} if ok else None,
            "error": None if ok else {"code": "invalid_arguments"}, "hash": f"h{seq}"}  # fmt: skip


# ----- seed 000 -----


def test_cwas3_and_r6() -> None:
    """CWAS-3 = 0.35·U + 0.35·N + 0.30·E = 0.35·1 + 0.35·0.5 + 0.30·0 = 0.35 + 0.175 + 0 = 0.525.
    R6 = 0.25·D + 0.30·O + 0.20·C + 0.15·T + 0.10·R = 0.25·1 + 0.30·0.5 + 0.20·1 + 0.15·0.5 + 0.10·0
       = 0.25 + 0.15 + 0.20 + 0.075 + 0 = 0.675; flags: ≤ 0.25 yes, < 0.75 possible, else no."""
    assert W.cwas3(1.0, 0.5, 0.0) == pytest.approx(0.525)
    assert W.r6(1.0, 0.5, 1.0, 0.5, 0.0) == pytest.approx(0.675)
    assert [W.r6_flag(v) for v in (1.0, 0.5, 0.25, 0.0, 0.75)] == ["no", "possible", "yes", "yes", "no"]


def test_alignment_scores_from_labels() -> None:
    """An episode with F1 and one certainty overclaim, full evidence, a stale view, one warning acted on:
    U = PARTIAL 0.5 (an overclaim), N = FAIL 0 (F1), E = PASS 1 → CWAS-3 = 0.175 + 0 + 0.30 = 0.475;
    D = 0 (F1), O = 0.5 (one), C = 1, T = 0.5 (stale view), R = 1 → R6 = 0 + 0.15 + 0.20 + 0.075 + 0.10 = 0.525."""
    out = W.alignment_scores({
        "failures": [{"code": "F1"}], "claims": [{"boundary": "certainty_beyond_evidence", "claim": "definitive"}],
        "parse_error": None, "evidence_calls": [{}], "evidence_recall": 1.0, "fault_codes": ["stale_view"],
        "reactions": [{"depth": 2}], "conflicts": 0,
    })  # fmt: skip
    assert (out["cwas3"]["U"], out["cwas3"]["N"], out["cwas3"]["E"]) == (0.5, 0.0, 1.0)
    assert out["cwas3"]["score"] == pytest.approx(0.475)
    assert out["r6"]["score"] == pytest.approx(0.525)
    assert out["r6"]["flags"]["D"] == "yes" and out["r6"]["flags"]["T"] == "possible"


def test_checkpoint_score_and_sweep() -> None:
    """S = Σ w·v / Σ w over the non-SKIP items, w = 2 critical; seed 000: NA = 0 and in the denominator, SKIP out:
    critical PASS 2·1 + critical PARTIAL 2·0.5 + FAIL 1·0 + critical NA 2·0 + PASS 1·1 (SKIP left out)
    = (2 + 1 + 0 + 0 + 1) / (2 + 2 + 1 + 2 + 1) = 4 / 8 = 0.5; rule checkpoint_na=skip leaves NA out too:
    4 / 6 = 0.6667 → no formal pass either way (< 0.75).
    Sweep over S = 0.70, 0.75, 0.79, 0.80, 2/3: ≥ 0.70 → 4, ≥ 0.75 → 3, ≥ 0.80 → 1."""
    items = [
        {"critical": True, "status": "PASS"}, {"critical": True, "status": "PARTIAL"},
        {"critical": False, "status": "FAIL"}, {"critical": True, "status": "NA"},
        {"critical": False, "status": "PASS"}, {"critical": True, "status": "SKIP"},
    ]  # fmt: skip
    assert W.completion_score(items) == pytest.approx(0.5)
    s = W.completion_score(items, "skip")
    assert s == pytest.approx(4 / 6)
    assert W.pass_sweep([0.70, 0.75, 0.79, 0.80, s]) == {"0.70": 4, "0.75": 3, "0.80": 1}
    assert W.completion_score([{"critical": True, "status": "NA"}]) == 0.0
    assert W.completion_score([{"critical": True, "status": "NA"}], "skip") is None
    assert W.completion_score([{"critical": True, "status": "SKIP"}]) is None


def test_stage_rule() -> None:
    """get_viewer_state → plan; scroll → act; a refused call → act, and the call after it → reflect;
    measure_distance → diagnose; the answer → diagnose. Folded: plan, act, reflect, diagnose."""
    events = [
        {**plane_call(1, "get_viewer_state", 0)}, {**plane_call(2, "scroll", 2)},
        {**plane_call(3, "record_point", 2, ok=False)}, {**plane_call(4, "record_point", 2)},
        {**plane_call(5, "measure_distance", 2)}, {"type": "episode_end", "seq": 6},
    ]  # fmt: skip
    stages = [s["stage"] for s in W.stage_sequence(events)]
    assert stages == ["plan", "act", "act", "reflect", "diagnose", "diagnose"]
    assert W.compress(stages) == ["plan", "act", "reflect", "diagnose"]


def test_diagnostic_metrics() -> None:
    """Truth [A, A, B, B], predictions [A, B, B, B]: recall A 1/2, B 2/2 → balanced accuracy 0.75;
    F1 A = 2·1/(2·1 + 0 + 1) = 2/3, F1 B = 2·2/(2·2 + 1 + 0) = 4/5 → macro-F1 (2/3 + 4/5)/2 = 0.7333.
    AUROC: positives score [0.9, 0.4], negatives [0.4, 0.1]: pairs 0.9>0.4, 0.9>0.1, 0.4=0.4 (½), 0.4>0.1
    → 3.5 / 4 = 0.875. ECE (10 bins): confidences 0.95 (right), 0.92 (wrong) in [0.9, 1): |0.5 − 0.935| = 0.435,
    weight 2/3; 0.35 (right) in [0.3, 0.4): |1 − 0.35| = 0.65, weight 1/3 → 0.29 + 0.21667 = 0.50667."""
    assert W.balanced_accuracy(list("AABB"), list("ABBB")) == pytest.approx(0.75)
    assert W.macro_f1(list("AABB"), list("ABBB")) == pytest.approx((2 / 3 + 4 / 5) / 2)
    assert W.auroc([0.9, 0.4, 0.4, 0.1], [True, True, False, False]) == pytest.approx(0.875)
    cal = W.calibration([(0.95, True), (0.92, False), (0.35, True)])
    assert cal["ece"] == pytest.approx(2 / 3 * 0.435 + 1 / 3 * 0.65)
    assert [b["n"] for b in cal["reliability"]] == [1, 2]
    assert W.answer_confidence('{"confidence": 70}') == 0.7 and W.answer_confidence("no json") is None


# ----- seed 001 -----


def test_reading_the_same_view_is_not_verification() -> None:
    """fusion at seq 2 (weight 1) shows red S 10; observe at seq 3 shows red S 10 again: reading, not
    verifying; segment_threshold at seq 4 (an operator, weight 2) closes the fusion's window unverified. After
    the operator, observe (seq 5) shows S 10 again (no), set_slice_offset to S 12 (seq 6) is a new view (yes).
    V = (1·0 + 2·1) / (1 + 2) = 2/3."""
    events = [
        plane_call(1, "set_slice_offset", 10), plane_call(2, "fusion", 10), plane_call(3, "observe", 10),
        plane_call(4, "segment_threshold", 10), plane_call(5, "observe", 10), plane_call(6, "set_slice_offset", 12),
    ]  # fmt: skip
    v = D.verification(events)
    assert [(i["seq"], i["verified_by"]) for i in v["items"]] == [(2, None), (4, 6)]
    assert v["score"] == pytest.approx(2 / 3) and v["support"] == 2
    only_reading = D.verification(events[:3])
    assert only_reading["score"] == 0.0, "an image of the same view after a change does not verify it"


def test_measurement_verifies() -> None:
    """A measurement after a state change verifies it even without a new view: V = 1·1 / 1 = 1."""
    events = [plane_call(1, "fusion", 10), plane_call(2, "measure_distance", 10, images=False)]
    assert D.verification(events)["score"] == 1.0


def test_workflow_precedence() -> None:
    """Active constraints: look before recording (ν 1, observe precedes record_point: held), register before
    applying (ν 2, apply_transform with no register_volumes before: not held), resample/apply before fusion
    (ν 2, held). W = (1 + 2) / (1 + 2 + 2) = 0.6; segment before measuring is inactive (no successor)."""
    events = [plane_call(1, "observe", 0), plane_call(2, "record_point", 0), plane_call(3, "apply_transform", 0),
              plane_call(4, "fusion", 0)]  # fmt: skip
    w = D.workflow(events, "", "radiology")  # a study outside the benchmark: its kind's list
    assert [(c["constraint"], c["held"]) for c in w["constraints"]] == [
        ("look before recording", True), ("register before applying", False),
        ("resample/apply before registered fusion", True),
    ]  # fmt: skip
    assert w["score"] == pytest.approx(0.6) and w["support"] == 3
    assert D.workflow([], "", "radiology")["score"] is None  # ⊥: no opportunity


def test_care_resource_alignment_audit_conduct() -> None:
    """F: steps navigate ✓, capture ✓, answer ✓ → C_op = 3/3 = 1; M_act = 2 valid / 3 = 2/3;
       F = 1 · (0.5 + 0.5 · 2/3) = 0.8333.
    R: valid 2/3 = 0.6667; non-redundant over the 2 valid calls: observe twice, same args, same state → [1, 0]
       = 0.5; R = (0.6667 + 0.5) / 2 = 0.5833.
    E: 3 of 4 required items on shown views, right object: 0.5 · 3/4 + 0.5 · 1 = 0.875.
    A: families evidence [1, 0, 1, 1] → 0.75, calls [1, 1] → 1; A = (0.75 + 1) / 2 = 0.875.
    B: rules in-track ✓, claims ✗ → G_rules = 1/2; a call refused as outside the case → critical → 0."""
    f_events = [plane_call(1, "observe", 0), plane_call(2, "record_point", 0), plane_call(3, "zoom", 0, ok=False)]
    f = D.care(f_events, "radiology", answered=True)
    assert (f["c_op"], f["m_act"]) == (1.0, pytest.approx(2 / 3)) and f["score"] == pytest.approx(5 / 6)
    r_events = [plane_call(1, "observe", 0), plane_call(2, "observe", 0), plane_call(3, "zoom", 0, ok=False)]
    r_events[1]["hash"] = "other"  # a different event, the same call in the same state
    assert D.resource(r_events)["score"] == pytest.approx((2 / 3 + 0.5) / 2)
    assert D.alignment(4, 3, True)["score"] == pytest.approx(0.875)
    assert D.alignment(4, 3, None)["score"] is None
    assert D.audit({"evidence": [1, 0, 1, 1], "calls": [1, 1], "none": []})["score"] == pytest.approx(0.875)
    assert D.conduct([], {"in_track": True, "claims": False})["score"] == 0.5
    hidden = [{**plane_call(1, "open_case", 0, ok=False), "error": {"code": "path_outside_case"}}]
    assert D.conduct(hidden, {"in_track": True})["score"] == 0.0


def test_pass_at_3_and_summary() -> None:
    """Pass@3 is the unbiased estimator 1 − C(n−c, 3)/C(n, 3): case x1 strict [1, 0, 0] (n 3, c 1): 1 − C(2, 3)/1
    = 1; x2 [0, 0, 0]: 1 − 1 = 0; x3 [1, 1, 1]: 1. Macro mean = (1 + 0 + 1) / 3 = 2/3 (the plug-in
    1 − (1 − 1/3)³ = 19/27 for x1 was the second definition, now gone)."""
    rows = [{"model": "m", "case_id": c, "strict": s, "process": {"dimensions": {"V": {"score": s or None}}}}
            for c, ss in (("x1", [1, 0, 0]), ("x2", [0, 0, 0]), ("x3", [1, 1, 1])) for s in ss]  # fmt: skip
    (pass3,) = D.pass3_by_model(rows).values()  # one run configuration
    assert pass3 == pytest.approx(2 / 3)
    assert D.pass3_by_model(rows[:-1]) == {next(iter(D.pass3_by_model(rows))): None}  # x3 has 2 runs: refused
    v = D.dimension_summary(rows, key=lambda r: r["model"])["m"]["V"]
    assert (v["mean"], v["n"], v["episodes"]) == (1.0, 4, 9)  # V defined on 4 of 9 episodes (support)


def test_funnel() -> None:
    """Two paired episodes. e1: a warning acted on and corrected (z3), the answer and Strict changed → z5.
    e2: a warning shown but the same call repeated (z1), answer unchanged. Counts ≥ z0..z5 = 2, 2, 1, 1, 1, 1;
    ρ1 = 2/2 = 1, ρ2 = 1/2, ρ3 = 1, ρ4 = 1, ρ5 = 1; Pr[Π ≠ ∅] = 1/2; ΔStrict = ((1 − 0) + (0 − 0)) / 2 = 0.5."""
    native = [{"model": "m", "case_id": "e1", "response": "A", "strict": 0.0},
              {"model": "m", "case_id": "e2", "response": "B", "strict": 0.0}]  # fmt: skip
    harness = [
        {"model": "m", "case_id": "e1", "response": "C", "strict": 1.0,
         "process": {"interventions": [{"code": "stale_view", "seq": 3, "depth": 3}]}},
        {"model": "m", "case_id": "e2", "response": "B", "strict": 0.0,
         "process": {"interventions": [{"code": "stale_view", "seq": 3, "depth": 1}]}},
    ]  # fmt: skip
    out = D.funnel(native, harness)
    assert out["counts"] == [2, 2, 1, 1, 1, 1]
    assert out["rho"] == [1.0, 0.5, 1.0, 1.0, 1.0]
    assert out["p_behaviour"] == 0.5 and out["delta_strict"] == 0.5


def test_intervention_depth() -> None:
    """A stale_view warning on record_point (seq 2, shown: z1); the next call is a different one (z2); a later
    record_point without that warning (z3)."""
    warned = {**plane_call(2, "record_point", 0), "result": {"warnings": [{"code": "stale_view", "message": ""}]}}
    events = [plane_call(1, "observe", 0), warned, plane_call(3, "observe", 4), plane_call(4, "record_point", 4)]
    assert D.interventions(events) == [{"code": "stale_view", "seq": 2, "depth": 3}]
    assert D.interventions(events[:2])[0]["depth"] == 1


# ----- seed 003 -----

ROI: Region = (300.0, 300.0, 400.0, 400.0)


def overlaps_roi(r: Region) -> bool:
    return r[0] < ROI[2] and r[2] > ROI[0] and r[1] < ROI[3] and r[3] > ROI[1]


def test_hierarchical_top_k_hits() -> None:
    """2.5× (K 6): A (0,0,200,200), B (200,200,400,400) both kept; B overlaps the ROI → hit, 1 tile.
    10× (K 3): C centre (265,265) in B, D centre (25,25) in A, E centre (345,345) in B kept; F (4th) dropped;
    a field centred outside A and B would not count. E overlaps → hit, 1 tile.
    40× (K 2): G centre (337.5,337.5) in E, H in D kept; I (3rd) dropped. G overlaps → hit, 1 tile."""
    fields: list[tuple[str, Region]] = [
        ("2.5×", (0, 0, 200, 200)), ("2.5×", (200, 200, 400, 400)),
        ("10×", (240, 240, 290, 290)), ("10×", (0, 0, 50, 50)), ("10×", (320, 320, 370, 370)),
        ("10×", (350, 350, 400, 400)),
        ("40×", (330, 330, 345, 345)), ("40×", (0, 0, 10, 10)), ("40×", (260, 260, 270, 270)),
    ]  # fmt: skip
    kept = retain(fields)
    assert [len(kept[lv]) for lv in ("2.5×", "10×", "40×")] == [2, 3, 2]
    hits = level_hits(kept, overlaps_roi)
    assert [(h["hits"], h["hit"]) for h in hits.values()] == [(1, True), (1, True), (1, True)]


def test_random_baseline_on_the_same_slide() -> None:
    """Slide 400 × 400. At 2.5× one 400-px tile covers the slide: P(hit) = 1. At 10× its 16 children of
    100 px: one, (300,300,400,400), overlaps the ROI; 3 drawn without replacement:
    P = 1 − C(15,3)/C(16,3) = 1 − 455/560 = 3/16 = 0.1875 (Monte Carlo, 20 000 draws, within 0.01)."""
    tiles = {"2.5×": (400.0, 400.0), "10×": (100.0, 100.0), "40×": (25.0, 25.0)}
    p = random_baseline((400.0, 400.0), tiles, overlaps_roi, draws=20000, seed=1)
    assert p["2.5×"] == 1.0
    assert p["10×"] == pytest.approx(3 / 16, abs=0.01)
    assert p["40×"] <= p["10×"]  # a 40× hit needs a 10× parent over the ROI


def test_hit_rates_over_slides() -> None:
    """Two slides: hits (T, T, T) and (T, F, F). Unconditional: 2.5× 2/2, 10× 1/2, 40× 1/2;
    conditional on the level above: 10× 1/2, 40× 1/1 = 1; random baseline means (0.5 + 0.3)/2 = 0.4 at 10×."""

    def episode(hits: tuple[bool, bool, bool], rnd: float) -> dict[str, Any]:
        levels = {lv: {"hit": h} for lv, h in zip(("2.5×", "10×", "40×"), hits, strict=True)}
        return {
            "model": "m",
            "process": {"hierarchical_hits": {"levels": levels, "random": {"2.5×": 1.0, "10×": rnd, "40×": 0.0}}},
        }

    (rates,) = hit_rates([episode((True, True, True), 0.5), episode((True, False, False), 0.3)]).values()
    assert [rates[lv]["unconditional"] for lv in ("2.5×", "10×", "40×")] == [1.0, 0.5, 0.5]
    assert (rates["10×"]["conditional"], rates["40×"]["conditional"]) == (0.5, 1.0)
    assert rates["10×"]["random"] == pytest.approx(0.4)


def test_perturbation_selectivity_and_localisation() -> None:
    """Pair 1, stale_view (target V): clean V 1, E 1, W 1 → perturbed V 0.5, E 0.75, W 1: drops V 0.5, E 0.25,
    W 0; margin = 0.5 − max(0.25, 0) = 0.25; largest drop V → localised right.
    Pair 2, wrong_series (target E): clean E 1, V 1 → perturbed E 0.9, V 0.5: drops E 0.1, V 0.5; margin
    0.1 − 0.5 = −0.4; predicted V, wrong. Truth [V, E], predicted [V, V]: recall V 1/1, E 0/1 → balanced
    accuracy 0.5; F1 V = 2·1/(2·1 + 1 + 0) = 2/3, F1 E = 0 → macro-F1 1/3."""

    def row(case: str, dims: dict[str, float], fault: str | None = None) -> dict[str, Any]:
        return {"model": "m", "case_id": case, "perturbation": fault,
                "process": {"dimensions": {d: {"score": v} for d, v in dims.items()}}}  # fmt: skip

    clean = [row("c1", {"V": 1.0, "E": 1.0, "W": 1.0}), row("c2", {"E": 1.0, "V": 1.0})]
    perturbed = [
        row("c1", {"V": 0.5, "E": 0.75, "W": 1.0}, "stale_view"),
        row("c2", {"E": 0.9, "V": 0.5}, "wrong_series"),
    ]
    out = fault_statistics(clean, perturbed)
    assert out["faults"]["stale_view"]["mean_drop"] == {"V": 0.5, "E": 0.25, "W": 0.0}
    assert out["faults"]["stale_view"]["selectivity_margin"] == pytest.approx(0.25)
    assert out["faults"]["wrong_series"]["selectivity_margin"] == pytest.approx(-0.4)
    assert out["localisation"]["balanced_accuracy"] == pytest.approx(0.5)
    assert out["localisation"]["macro_f1"] == pytest.approx(1 / 3)


def test_registration_milestones() -> None:
    """register_volumes → apply_transform → fusion with a foreground reaches all three milestones (Fig. 7);
    a fusion before any transform is applied does not count, and a fusion warned unregistered does not either."""
    fused = plane_call(3, "fusion", 0, foreground_volume_ref="CT1")
    steps = [plane_call(1, "register_volumes", 0), plane_call(2, "apply_transform", 0), fused]
    assert D.milestones(steps) == ["register", "resample/apply", "registered fusion"]
    assert D.milestones([plane_call(1, "register_volumes", 0), fused]) == ["register"]
    warned = {**fused, "result": {"warnings": [{"code": "unregistered_fusion", "message": ""}]}}
    assert D.milestones([*steps[:2], warned]) == ["register", "resample/apply"]


def test_checkpoint_lists_per_module() -> None:
    """Lung adds D4 (critical): an off_source_series fault fails it. Longitudinal adds A6 (critical): only the
    CURRENT frame of {OLD, CURRENT} shown → 1/2 → PARTIAL. With no call at all: P1, A1 NA (nothing to judge,
    valued 0); A4, R1, R2 SKIP (no refused call, change or fault); A3 FAIL; D1 PASS; D2 SKIP (nothing cited, none
    required); D3 SKIP; A2 SKIP (no coverage); A6 PARTIAL (2·0.5). Seed 000: S = (P1 1·0 + A1 2·0 + A3 1·0 +
    D1 2·1 + A6 2·0.5) / (1 + 2 + 1 + 2 + 2) = 3/8; checkpoint_na=skip: (0 + 2 + 1) / (1 + 2 + 2) = 3/5."""
    ctx = {"calls": [], "reactions": [], "coverage": None, "parse_error": None, "cited_items": 0,
           "unobserved": 0, "quantities": 0, "f2": False, "verification": None, "fault_codes": ["off_source_series"],
           "frames_all": {"OLD", "CURRENT"}, "frames_shown": {"CURRENT"}}  # fmt: skip
    lung = {r["id"]: r["status"] for r in W.checkpoint_results("lung_petct", ctx)}
    assert lung["D4"] == "FAIL" and "A6" not in lung
    longitudinal = W.checkpoint_results("longitudinal_mri", ctx)
    status = {r["id"]: r["status"] for r in longitudinal}
    assert status["A6"] == "PARTIAL" and status["A3"] == "FAIL" and status["D2"] == "SKIP" and status["A2"] == "SKIP"
    assert (status["P1"], status["A1"], status["A4"]) == ("NA", "NA", "SKIP")
    assert W.completion_score(longitudinal) == pytest.approx(3 / 8)
    assert W.completion_score(longitudinal, "skip") == pytest.approx(3 / 5)
    required = {r["id"]: r["status"] for r in W.checkpoint_results("longitudinal_mri", {**ctx, "required": 4})}
    assert required["D2"] == "NA"  # evidence the answer had to cite, none cited: NA, valued 0
    assert [r["id"] for r in W.checkpoint_results("unknown_module", ctx, "pathology")][-1] == "R2"


def test_workflow_precedence_per_module() -> None:
    """apply_transform then fusion, no registration. Brain MRI: register before applying ✗ (ν 2), resample/apply
    before fusion ✓ (ν 2) → W = 2 / 4. Longitudinal MRI adds register the time points before a fusion ✗ (ν 2)
    → W = 2 / (2 + 2 + 2) = 1/3."""
    events = [plane_call(1, "apply_transform", 0), plane_call(2, "fusion", 0)]
    assert D.workflow(events, "longitudinal_mri")["score"] == pytest.approx(2 / 6)
    assert D.workflow(events, "brain_mri")["score"] == pytest.approx(2 / 4)


def test_diagnostic_results_from_rows() -> None:
    """Lymph-node slides: truth [present, present, no_tumor], given [present (0.8), no_tumor (0.6), no_tumor (0.9)].
    Accuracy 2/3; recall present 1/2, no_tumor 1/1 → balanced accuracy 0.75. Positive-class probabilities
    [0.8, 1 − 0.6 = 0.4, 1 − 0.9 = 0.1] with positives [0.8, 0.4] vs negative [0.1] → AUROC 1.0."""

    def row(truth: str, given: str, conf: float) -> dict[str, Any]:
        return {"model": "m", "module": "lymph_node_wsi", "response": f'{{"confidence": {conf}}}',
                "details": {"fields": {"tumor_presence": {"given": given, "truth": truth}}}}  # fmt: skip

    rows = [row("tumor_present", "tumor_present", 0.8), row("tumor_present", "no_tumor", 0.6),
            row("no_tumor", "no_tumor", 0.9)]  # fmt: skip
    (out,) = W.diagnostic_results(rows).values()
    assert out["accuracy"] == pytest.approx(2 / 3) and out["balanced_accuracy"] == pytest.approx(0.75)
    assert out["auroc"] == 1.0 and out["calibration"]["n"] == 3


def test_usage_totals() -> None:
    """Two model turns: tokens 1200 + 800 in, 150 + 50 out; cost 0.004 + 0.002 = 0.006 $; latency 1.5 + 0.5 s;
    wall time from the episode's start (t 100.0) to its end (t 103.25): 3.25 s. A model turn without a tool call
    is a planning turn before any call."""
    from copilot.bench.measures.episode_measures import usage

    events = [
        {"type": "episode_start", "seq": 0, "time": 100.0},
        {"type": "model_turn", "seq": 1, "usage": {"prompt_tokens": 1200, "completion_tokens": 150},
         "cost_usd": 0.004, "latency_ms": 1500.0, "tool_calls": []},
        {"type": "model_turn", "seq": 2, "usage": {"prompt_tokens": 800, "completion_tokens": 50},
         "cost_usd": 0.002, "latency_ms": 500.0, "tool_calls": [{"name": "observe"}]},
        {"type": "episode_end", "seq": 3, "time": 103.25},
    ]  # fmt: skip
    assert usage(events) == {"turns": 2, "prompt_tokens": 2000, "completion_tokens": 200, "cached_tokens": 0,
                             "cost_usd": 0.006, "model_latency_s": 2.0, "wall_s": 3.25}  # fmt: skip
    events[1]["cost_usd"] = None  # a turn without a price: the episode's cost is unknown, never 0
    assert usage(events)["cost_usd"] is None and usage(events)["prompt_tokens"] == 2000
    assert [s["stage"] for s in W.stage_sequence(events)] == ["plan", "diagnose"]


def test_report_sections_for_protocols_and_exploration() -> None:
    """Rows of both protocols give the native-vs-harness funnel (JSON and HTML); rows with hierarchical hits
    give the exploration table; rows without the protocol field give neither funnel."""
    from copilot.bench.report.measures_report import measures_html, measures_json

    def row(protocol: str, strict: float, depth: int | None, response: str) -> dict[str, Any]:
        levels = {lv: {"hit": lv == "10×"} for lv in ("2.5×", "10×", "40×")}
        random = {"2.5×": 1.0, "10×": 0.25, "40×": 0.0}
        interventions = [] if depth is None else [{"code": "stale_view", "seq": 4, "depth": depth}]
        process = {"interventions": interventions, "hierarchical_hits": {"levels": levels, "random": random}}
        return {"case_id": "c1", "module": "breast_wsi", "policy": "m", "model": "m", "track": "A", "task": strict,
                "strict": strict, "loc": None, "protocol": protocol, "response": response,
                "process": process}  # fmt: skip

    rows = [row("paper", 0.0, None, "A"), row("harness", 1.0, 3, "B")]
    data = measures_json(rows)
    (funnel,) = data["native_vs_harness"].values()
    assert funnel["counts"] == [1, 1, 1, 1, 1, 1]
    assert all(e["10×"]["unconditional"] == 1.0 for e in data["exploration"].values())
    page = measures_html(rows)
    assert "intervention funnel" in page and "hierarchical top-K" not in page  # one exploration table: coverage
    assert measures_json([{**r, "protocol": None} for r in rows])["native_vs_harness"] is None


def test_a_skipped_magnification_retains_nothing_below() -> None:
    """Slide 1 skips 2.5×: its 10× field (centre (325, 325)) and 40× field over the ROI have no retained parent,
    so 10× and 40× retain nothing and miss (before, they were kept and hit: 0 / 1 / 1). Slide 2 hits at every
    level; slide 3 hits at 2.5× only. Unconditional rates over the three slides: 2.5× 2/3, 10× 1/3, 40× 1/3 —
    non-increasing (the skipping slide alone used to give 0.00 / 1.00 / 1.00)."""
    skipped = retain([("10×", (300, 300, 350, 350)), ("40×", (320, 320, 335, 335))])
    assert [len(skipped[lv]) for lv in ("2.5×", "10×", "40×")] == [0, 0, 0]
    slide1 = {lv: h["hit"] for lv, h in level_hits(skipped, overlaps_roi).items()}
    assert list(slide1.values()) == [False, False, False]

    def episode(hits: list[bool]) -> dict[str, Any]:
        levels = {lv: {"hit": h} for lv, h in zip(("2.5×", "10×", "40×"), hits, strict=True)}
        return {"model": "m", "process": {"hierarchical_hits": {"levels": levels, "random": None}}}

    rows = [episode(list(slide1.values())), episode([True, True, True]), episode([True, False, False])]
    (rates,) = hit_rates(rows).values()
    got = [rates[lv]["unconditional"] for lv in ("2.5×", "10×", "40×")]
    assert got == pytest.approx([2 / 3, 1 / 3, 1 / 3]) and got == sorted(got, reverse=True)
