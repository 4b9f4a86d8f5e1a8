"""Process metrics of an episode, computed from its trace alone (plus the case's hidden truth for coverage).

Each metric serves one process dimension of the Medical Harness Protocol (MedHarnessBench); the
definitions are in docs/ARCHITECTURE.md ("Process metrics"):
- evidence alignment (Patient–Evidence Alignment): cited evidence lies on views the agent rendered;
- closed-loop verification: a state-changing call is followed by an observation before the next change;
- auditability (Clinical Auditability): every cited evidence value appears in a recorded call output;
- resource competence (Clinical Resource Competence): refused/failed calls, redundant calls, budget used;
- conduct (Clinical Conduct Boundaries): calls outside the track (refused as not_in_track);
- workflow continuity: run-time workflow guards (warnings in handler results), counted by code;
- care action fulfillment: the episode ended with a parseable answer within its budget.
The measures of the related benchmarks (failure labels, stages, checkpoints, the seven dimensions by their
equations…) are added by `copilot.bench.measures.episode_measures` (docs/metrics.md).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from copilot.bench.measures.coverage import episode_coverage
from copilot.bench.measures.episode_measures import harness_measures
from copilot.bench.measures.trace_views import RAS_INDEX, TOL_MM, point_on_plane, shown_fields, shown_planes
from copilot.bench.scoring import parsers as P
from copilot.cases.pack import CasePack

TOL_VALUE = 0.05  # a cited value matches a recorded output (answers round to 0.01)
STATE_CHANGING = frozenset({"fusion", "load_image", "set_image_type"})  # besides every analysis operator
OPERATORS = frozenset(
    {
        "register_volumes",
        "apply_transform",
        "resample_volume",
        "segment_threshold",
        "segment_grow_from_seeds",
        "segment_statistics",
        "vista3d_segment",
    }
)
OBSERVATIONS = frozenset({"observe", "get_viewer_state", "get_qupath_state", "capture_viewer", "bookmark_view"})


def calls(events: list[dict[str, Any]], actor: str | None = "agent") -> list[dict[str, Any]]:
    """Handler-call events (of one actor, or all)."""
    return [e for e in events if e.get("type") == "handler_call" and (actor is None or e.get("actor") == actor)]


def call_signature(event: dict[str, Any]) -> str:
    """`handler:hash8` of a call's handler and canonical arguments (used to compare repeated runs)."""
    args = json.dumps(event.get("args", {}), sort_keys=True, separators=(",", ":"))
    return f"{event['handler']}:{hashlib.sha256(args.encode()).hexdigest()[:8]}"


def warnings_of(event: dict[str, Any]) -> list[dict[str, Any]]:
    result = event.get("result") or {}
    return list(result.get("warnings", [])) if isinstance(result, dict) else []


def _ras_outputs(event: dict[str, Any]) -> list[tuple[list[float], str | None]]:
    """RAS points a call produced, with the volume they were converted on."""
    result = event.get("result") or {}
    out = []
    if isinstance(result.get("ras"), list) and len(result["ras"]) == 3:
        out.append((result["ras"], result.get("volume")))
    ev = result.get("evidence")
    if isinstance(ev, dict) and isinstance(ev.get("ras"), list):
        out.append((ev["ras"], ev.get("volume")))
    return out


def evidence_provenance(events: list[dict[str, Any]], response: str) -> dict[str, Any] | None:
    """Series on which the cited key slices were read and the cited RAS point was converted.

    The RAS point: the volume of the last call whose output RAS equals it (image_coords_to_ras, record_point);
    a key slice: the background volume of the last plane shown at that offset on its axis; otherwise
    the volume active when the answer was given (the corner overlay the agent read).
    """
    cited = P.cited_evidence(response, "")  # the EVIDENCE block, whatever the module
    if not cited:
        return None
    all_calls = [e for e in calls(events, None) if e.get("ok")]
    if not all_calls:
        return None
    active = (all_calls[-1].get("state") or {}).get("active_volume_name")
    ras_series = active if cited["ras"] is not None else None
    for e in all_calls if cited["ras"] is not None else []:
        for ras, vol in _ras_outputs(e):
            if vol and all(abs(a - b) <= TOL_VALUE for a, b in zip(ras, cited["ras"], strict=True)):
                ras_series = vol
    slice_series = {}
    for axis, value in cited["key_slices"].items():
        found = active
        for e in all_calls:
            for plane in shown_planes(e):
                if plane["axis"] == axis and abs(plane["offset"] - value) <= TOL_MM:
                    found = plane["volume_name"]
            for ras, vol in _ras_outputs(e):
                if vol and abs(ras[RAS_INDEX[axis]] - value) <= TOL_VALUE:
                    found = vol
        slice_series[axis] = found
    names = sorted({s for s in slice_series.values() if s})
    return {
        "key_slices": names[0] if len(names) == 1 else ", ".join(names) or None,
        "ras": ras_series,
        "key_slice_series": slice_series,
    }


def _alignment(events: list[dict[str, Any]], cited: dict[str, Any]) -> dict[str, Any]:
    """Cited evidence items lying on views the agent rendered (returned images)."""
    items: dict[str, bool] = {}
    if "key_slices" in cited:  # an EVIDENCE block: the key slices and RAS point it gives
        planes = [p for e in events for p in shown_planes(e)]
        ras = cited["ras"]
        ras_seen = ras is not None and any(point_on_plane(ras, p) for p in planes)
        if ras is not None:
            items["RAS"] = ras_seen
        for axis, value in cited["key_slices"].items():
            direct = any(p["axis"] == axis and abs(p["offset"] - value) <= TOL_MM for p in planes)
            items[f"KEY_SLICE_{axis}"] = direct or (ras_seen and abs(ras[RAS_INDEX[axis]] - value) <= TOL_MM)
    elif cited.get("points"):
        fields = [f for e in events for f in shown_fields(e)]
        for n, (x, y) in enumerate(cited["points"]):
            items[f"point_{n + 1}"] = any(
                f["region"][0] <= x <= f["region"][2] and f["region"][1] <= y <= f["region"][3] for f in fields
            )
    return {"items": items, "score": (sum(items.values()) / len(items)) if items else None}


def _recorded_values(events: list[dict[str, Any]]) -> list[float]:
    """Every number in the recorded call outputs (results and states)."""
    out: list[float] = []

    def walk(v: Any) -> None:
        if isinstance(v, bool):
            return
        if isinstance(v, int | float):
            out.append(float(v))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for e in events:
        walk(e.get("result"))
        walk((e.get("state") or {}).get("views"))
        walk((e.get("state") or {}).get("evidence"))
    return out


def _auditability(events: list[dict[str, Any]], cited: dict[str, Any]) -> dict[str, Any]:
    """Cited evidence values that appear in a recorded call output (traceable to a call)."""
    values = sorted(_recorded_values(events))
    items: dict[str, bool] = {}

    def traced(v: float) -> bool:
        return any(abs(v - r) <= TOL_VALUE for r in values)

    if "key_slices" in cited:
        for axis, value in cited["key_slices"].items():
            items[f"KEY_SLICE_{axis}"] = traced(value)
        if cited["ras"] is not None:
            items["RAS"] = all(traced(v) for v in cited["ras"])
    for n, (x, y) in enumerate(cited.get("points", [])):
        items[f"point_{n + 1}"] = traced(x) and traced(y)
    return {"items": items, "score": (sum(items.values()) / len(items)) if items else None}


def _verification(events: list[dict[str, Any]]) -> dict[str, Any]:
    """State-changing calls followed by an observation before the next state change or the answer."""
    agent = [e for e in events if e.get("ok")]
    changing = [n for n, e in enumerate(agent) if e["handler"] in OPERATORS or e["handler"] in STATE_CHANGING]
    verified = 0
    for i, n in enumerate(changing):
        stop = changing[i + 1] if i + 1 < len(changing) else len(agent)
        if any(agent[m].get("images") or agent[m]["handler"] in OBSERVATIONS for m in range(n + 1, stop)):
            verified += 1
    return {
        "state_changing": len(changing),
        "verified": verified,
        "score": verified / len(changing) if changing else None,
    }


def _resources(events: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    """Refused or failed calls, redundant repeats (same call, same state), share of the budget used."""
    invalid = sum(1 for e in events if not e.get("ok") and (e.get("error") or {}).get("code") != "not_in_track")
    redundant = 0
    seen: dict[Any, Any] = {}
    for e in events:
        if not e.get("ok"):
            continue
        sig = call_signature(e)
        state = json.dumps(e.get("state"), sort_keys=True)
        if seen.get(sig) == state:
            redundant += 1
        seen[sig] = state
    n = len(events)
    return {
        "calls": n,
        "invalid": invalid,
        "redundant": redundant,
        "budget_used": round(n / budget, 6) if budget else None,
        "score": 1.0 - (invalid + redundant) / n if n else None,
    }


def guard_counts(events: list[dict[str, Any]]) -> dict[str, int]:
    """Run-time workflow guard firings (warnings carried by handler results), by code."""
    return dict(Counter(w.get("code", "warning") for e in events for w in warnings_of(e)))


def episode_metrics(events: list[dict[str, Any]], case: CasePack, score: Any, budget: int) -> dict[str, Any]:
    """All process metrics of one episode, plus its exploration coverage and call signatures."""
    agent = calls(events)
    end: dict[str, Any] = next((e for e in reversed(events) if e.get("type") == "episode_end"), {})
    response = str(end.get("response", ""))
    cited = P.cited_evidence(response, case.module)
    refused = [e["handler"] for e in agent if (e.get("error") or {}).get("code") == "not_in_track"]
    out = {
        "evidence_alignment": _alignment(agent, cited),
        "closed_loop_verification": _verification(agent),
        "auditability": _auditability(calls(events, None), cited),
        "resource_competence": _resources(agent, budget),
        "conduct": {"out_of_track": len(refused), "handlers": refused, "score": 0.0 if refused else 1.0},
        "workflow_guards": guard_counts(agent),
        "care_action_fulfillment": {
            "score": float(end.get("status") == "done" and getattr(score, "parse_error", None) is None)
        },
        "coverage": episode_coverage(events, case),
        "signature": [call_signature(e) for e in agent],
    }
    return {**out, **harness_measures(events, case, score, out)}
