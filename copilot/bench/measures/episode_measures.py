"""Per-episode measures of the related benchmarks, stored with the episode's process metrics (`process`):
failure labels, stage sequence, checkpoints and S, claim-boundary violations, CWAS-3, R6, the seven
dimensions, guard interventions, the 003 hierarchical hits, the reflection rounds, and token, time and cost totals."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from copilot.bench.measures import dimensions as D
from copilot.bench.measures import workflow_audit as W
from copilot.bench.measures.exploration import hierarchical_hits
from copilot.bench.measures.failures import (
    detect_failures,
    measurements,
    rationale,
    stated_quantities,
    supported,
    unobserved_items,
)
from copilot.bench.measures.reflection import episode_reflection
from copilot.bench.measures.trace_facts import reactions, workflow_faults
from copilot.bench.scoring import parsers as P
from copilot.bench.scoring.scorers import Truth
from copilot.cases.pack import CasePack
from copilot.kind_names import RADIOLOGY

REQUIRED_ITEMS = {RADIOLOGY: 4}  # per viewer kind whose answer format fixes them: three key slices and a RAS point
CAPTURES = frozenset({"record_point", "record_key_slice", "record_view_evidence", "bookmark_view",
                      "measure_distance", "image_coords_to_ras", "viewer_point_to_wsi_coordinate"})  # fmt: skip


def _end(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next((e for e in reversed(events) if e.get("type") == "episode_end"), {})


def usage(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Tokens, model latency, cost and wall time of an episode from its model turns and start/end events."""
    turns = [e for e in events if e.get("type") == "model_turn"]
    start = next((e.get("time") for e in events if e.get("type") == "episode_start"), None)
    end = _end(events).get("time")
    costs: list[float | None] = [t.get("cost_usd") for t in turns]
    return {
        "turns": len(turns),
        "prompt_tokens": sum(int((t.get("usage") or {}).get("prompt_tokens", 0)) for t in turns),
        "completion_tokens": sum(int((t.get("usage") or {}).get("completion_tokens", 0)) for t in turns),
        "cached_tokens": sum(int((t.get("usage") or {}).get("cached_tokens", 0)) for t in turns),
        # a turn without a price makes the episode's cost unknown (shown as tokens only), never 0
        "cost_usd": None if any(c is None for c in costs) else round(sum(c or 0.0 for c in costs), 6),
        "model_latency_s": round(sum(float(t.get("latency_ms") or 0.0) for t in turns) / 1000.0, 3),
        "wall_s": round(float(end) - float(start), 3) if start is not None and end is not None else None,
    }


def _call_record_complete(e: dict[str, Any]) -> float:
    """A call is reconstructable when its arguments, outcome (result or error), state and hash were recorded."""
    outcome = e.get("result") is not None if e.get("ok") else e.get("error") is not None
    return float("args" in e and outcome and bool(e.get("hash")) and (not e.get("ok") or "state" in e))


def harness_measures(events: list[dict[str, Any]], case: CasePack, score: Any, base: dict[str, Any]) -> dict[str, Any]:
    """Everything above for one episode; a fault in a measure is recorded in the row, never fatal to the batch."""
    try:
        return _measures(events, case, score, base)
    except Exception as exc:  # the episode's score and trace stay; the measures say why they are missing
        return {"measures_error": f"{type(exc).__name__}: {exc}"}


def _measures(events: list[dict[str, Any]], case: CasePack, score: Any, base: dict[str, Any]) -> dict[str, Any]:
    """Everything above for one episode; `base` holds the episode's process metrics (coverage, auditability)."""
    end = _end(events)
    response = str(end.get("response", ""))
    parse_error = getattr(score, "parse_error", None)
    text = rationale(response)
    truth = Truth(case)  # read once: the failure detectors and the exploration hits share it
    faults = workflow_faults(events, case)  # from the trace facts: the same with or without the run-time guards
    failures = [f.to_json() for f in detect_failures(events, case, response, truth, faults)]
    codes = {f["code"] for f in failures}
    calls = D.agent_calls(events)

    measured = measurements(events)
    unsupported = [q for q in stated_quantities(text) if supported(q, measured) is None]
    # conflicting evidence: a stated size a measurement contradicts; an answer away from the agent's own recording
    conflicts = sum(1 for q in unsupported if any(kind == q.kind for kind, _, _ in measured)) + ("F4" in codes)
    series = [PurePosixPath(str(p)).name.split(".")[0] for p in (case.inputs.get("volumes") or [])]
    claims = W.claim_violations(case.kind, text, events, sorted({q.text for q in unsupported}), series, faults)

    cited = P.cited_evidence(response, case.module)
    cited_items = (len(cited["key_slices"]) + (cited["ras"] is not None) if "key_slices" in cited
                   else len(cited.get("points", [])))  # fmt: skip
    missing = len(unobserved_items(events, cited)) if cited else 0
    # U_req: the evidence the answer format asks for (radiology with an EVIDENCE block: three key slices and a
    # RAS point; slides: the localizations given, none on a negative answer); none → E is ⊥
    if case.kind in REQUIRED_ITEMS:
        required = REQUIRED_ITEMS[case.kind] if case.prompt.get("evidence") else 0
    else:
        required = cited_items
    retrieved = cited_items - missing
    interventions = D.interventions(events)  # the guard warnings the model was shown (the funnel's)
    fault_reactions = reactions(events, faults)  # what the agent did after each fault, warned or not
    fault_codes = sorted({f["code"] for f in faults})

    verification = D.verification(events)
    dims = {
        "F": D.care(events, case.kind, parse_error is None and end.get("status") == "done"),
        "R": D.resource(events),
        "E": D.alignment(required, retrieved, None if not end else not codes & {"F1", "F3"}),
        "W": D.workflow(events, case.module, case.kind),
        "A": D.audit(
            {
                "cited evidence traced to a call output": [
                    float(v) for v in (base.get("auditability") or {}).get("items", {}).values()
                ],
                "call records complete": [_call_record_complete(e) for e in calls],
            }
        ),
        "V": verification,
        "B": D.conduct(
            events,
            {
                "calls within the track": not (base.get("conduct") or {}).get("out_of_track"),
                "claims within the boundaries": not claims,
            },
        ),
    }
    frames = case.inputs.get("frames_of_reference") or {}
    shown_series = {
        str((e.get("state") or {}).get("active_volume_name"))
        for e in events
        if e.get("type") == "handler_call" and e.get("ok") and e.get("images")
    }
    checkpoints = W.checkpoint_results(case.module, {
        "fault_codes": fault_codes, "frames_all": set(frames.values()),
        "frames_shown": {frames[s] for s in shown_series if s in frames},
        "calls": calls, "reactions": fault_reactions, "coverage": base.get("coverage"),
        "parse_error": parse_error, "cited_items": cited_items, "unobserved": missing,
        "quantities": len(stated_quantities(text)), "f2": "F2" in codes, "verification": verification["score"],
        "required": required,
    }, case.kind)  # fmt: skip
    na_rule = ((getattr(score, "details", None) or {}).get("rules") or {}).get("checkpoint_na", "zero")
    s = W.completion_score(checkpoints, na_rule)
    stages = W.stage_sequence(events, {f["seq"] for f in faults})
    alignment = W.alignment_scores({
        "failures": failures, "claims": claims, "parse_error": parse_error,
        "evidence_calls": [e for e in calls if e.get("ok") and e["handler"] in CAPTURES] or
                          [e for e in calls if e.get("ok") and e.get("images")],
        "evidence_recall": retrieved / required if required else None, "fault_codes": fault_codes,
        "reactions": fault_reactions, "conflicts": conflicts,
    })  # fmt: skip
    out: dict[str, Any] = {
        "failures": failures,
        "stages": stages,
        "stage_path": W.compress([x["stage"] for x in stages]),
        "checkpoints": {"items": checkpoints, "S": s, "formal_pass": s is not None and s >= W.PASS_THRESHOLD,
                        "na_rule": na_rule},
        "claims": claims,
        **alignment,
        "dimensions": dims,
        "interventions": interventions,
        "faults": faults,
        "milestones": D.milestones(events, faults),
        "reflection": episode_reflection(events, case, truth, sum(1 for x in stages if x["stage"] == "reflect")),
        "usage": usage(events),
        "confidence": W.answer_confidence(response),
    }
    if case.inputs.get("slide"):  # a slide, explored by magnification
        out["hierarchical_hits"] = hierarchical_hits(events, case, truth)
    return out
