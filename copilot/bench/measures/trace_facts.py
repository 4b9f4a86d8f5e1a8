"""Workflow faults read from an episode's trace facts — which series a point or slice came from, what had been
shown before, the viewport, the frames of reference — never from whether a run-time guard spoke.

The run-time guards (`copilot.tools.guards`, `slide_guards`) warn the model under the `harness` protocol and are
silent under `paper`; the faults below are the same facts recomputed from the recorded calls, so failure labels
and checkpoints are identical under both protocols for the same calls. Codes match the guards' codes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from copilot.bench.measures.trace_views import TOL_MM, point_on_plane, shown_planes
from copilot.cases.pack import CasePack
from copilot.kind_names import PATHOLOGY, RADIOLOGY
from copilot.tools.slide_guards import MIN_EVIDENCE_MAGNIFICATION, RESOLUTION_FACTOR, TOL_PX

STATE_FAULTS = frozenset({"stale_view", "off_source_series", "superseded_node", "unregistered_fusion"})
SOURCE_CHECKED = frozenset({"record_key_slice", "record_point", "image_coords_to_ras"})


def _calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == "handler_call" and e.get("ok")]


def _fault(e: dict[str, Any], code: str, detail: str) -> dict[str, Any]:
    return {"seq": int(e["seq"]), "code": code, "detail": detail}


def _evidence(e: dict[str, Any]) -> dict[str, Any]:
    result = e.get("result") if isinstance(e.get("result"), dict) else {}
    ev = (result or {}).get("evidence")
    return ev if isinstance(ev, dict) else (result or {})


def radiology_faults(events: list[dict[str, Any]], source: str | None, frames: dict[str, str]) -> list[dict[str, Any]]:
    """Evidence off the source series, on a slice or point no earlier image showed, and fusions of unregistered
    frames or of a node its registered copy superseded (frames of derived volumes follow their operator)."""
    out: list[dict[str, Any]] = []
    planes: list[dict[str, Any]] = []
    frame_of_id: dict[str, str] = {}
    superseded: dict[str, str] = {}  # old volume id → the registered copy's id
    for e in _calls(events):
        names = {str(v.get("id")): str(v.get("name")) for v in (e.get("state") or {}).get("volumes") or []}
        for vid, name in names.items():
            if name in frames:
                frame_of_id.setdefault(vid, str(frames[name]))
        h, agent = e["handler"], e.get("actor") == "agent"
        ev = _evidence(e)
        if agent and h in SOURCE_CHECKED and source and ev.get("volume") and ev["volume"] != source:
            out.append(_fault(e, "off_source_series", f"evidence taken on {ev['volume']}, not {source}"))
        if agent and h == "record_key_slice" and ev.get("axis") is not None:
            off = float(ev.get("offset_mm", 0.0))
            if not any(p["axis"] == ev["axis"] and abs(p["offset"] - off) <= TOL_MM for p in planes):
                out.append(_fault(e, "unobserved_evidence", f"{ev['axis']} = {off:.1f} mm never shown"))
        ras = ev.get("ras") if h == "record_point" else None
        if agent and isinstance(ras, list) and not any(point_on_plane(ras, p) for p in planes):
            out.append(_fault(e, "unobserved_evidence", f"RAS {ras} on no plane shown"))
        prov = (e.get("result") or {}).get("provenance") if isinstance(e.get("result"), dict) else None
        if isinstance(prov, dict) and (new := (e.get("result") or {}).get("volume_id")):
            origin = prov.get("reference") if prov.get("operator") == "apply_transform" else prov.get("source")
            if origin in frame_of_id:
                frame_of_id[str(new)] = frame_of_id[str(origin)]
            if prov.get("operator") == "apply_transform" and prov.get("source"):
                superseded[str(prov["source"])] = str(new)
        if agent and h == "fusion":
            out += _fusion_faults(e, frame_of_id, superseded, names)
        planes += shown_planes(e)
    return out


def _fusion_faults(
    e: dict[str, Any], frame_of_id: dict[str, str], superseded: dict[str, str], names: dict[str, str]
) -> list[dict[str, Any]]:
    result = e.get("result") or {}
    bg, fg = result.get("background_volume"), result.get("foreground_volume")
    if not bg or not fg:
        return []
    out = []
    fb, ff = frame_of_id.get(str(bg)), frame_of_id.get(str(fg))
    if fb and ff and fb != ff:
        out.append(_fault(e, "unregistered_fusion", f"{names.get(bg, bg)} ({fb}) over {names.get(fg, fg)} ({ff})"))
    for vid in (str(bg), str(fg)):
        if vid in superseded:
            out.append(_fault(e, "superseded_node", f"{names.get(vid, vid)} superseded by {superseded[vid]}"))
    return out


def _view(state: dict[str, Any]) -> tuple[Any, ...]:
    return (state.get("image"), tuple(state.get("visible_region") or ()), state.get("downsample"),
            tuple(state.get("viewer_size") or ()))  # fmt: skip


def _seen(view: tuple[Any, ...], state: dict[str, Any], x: float, y: float) -> bool:
    if view[0] != state.get("image") or not view[1] or view[2] is None or state.get("downsample") is None:
        return False
    x0, y0, x1, y1 = view[1]
    fine = float(view[2]) <= RESOLUTION_FACTOR * float(state["downsample"]) * (1 + 1e-9)
    return fine and x0 - TOL_PX <= x <= x1 + TOL_PX and y0 - TOL_PX <= y <= y1 + TOL_PX


def slide_faults(events: list[dict[str, Any]], min_magnification: float) -> list[dict[str, Any]]:
    """Recordings and conversions of a point (or view centre) no earlier screenshot showed at a comparable
    resolution, made while the viewport differed from the last screenshot, or recorded below the magnification
    localisation needs."""
    out: list[dict[str, Any]] = []
    shown: list[tuple[Any, ...]] = []
    for e in _calls(events):
        state = e.get("state") or {}
        h = e["handler"]
        if e.get("actor") == "agent" and h in ("record_view_evidence", "viewer_point_to_wsi_coordinate"):
            ev = _evidence(e)
            point = ev.get("point") if h == "record_view_evidence" else ev
            if isinstance(point, dict) and "x" in point:
                x, y = float(point["x"]), float(point["y"])
            else:
                x, y = (float(v) for v in (state.get("center") or (0.0, 0.0)))
            if not any(_seen(v, state, x, y) for v in shown):
                out.append(_fault(e, "unobserved_evidence", f"({x:.0f}, {y:.0f}) in no viewport shown"))
            if shown and shown[-1] != _view(state):
                out.append(_fault(e, "stale_view", "the viewport changed since the last screenshot"))
            mag = state.get("magnification")
            if h == "record_view_evidence" and mag is not None and float(mag) < min_magnification:
                out.append(_fault(e, "low_magnification_evidence", f"recorded at {float(mag):.2f}×"))
        if e.get("images") and state.get("image_open"):
            shown.append(_view(state))
    return out


def workflow_faults(events: list[dict[str, Any]], case: CasePack) -> list[dict[str, Any]]:
    """Every workflow fault of an episode from its trace facts, in call order: `{seq, code, detail}`."""
    inputs = case.inputs or {}
    if case.kind == PATHOLOGY:
        need = inputs.get("min_evidence_magnification")
        return slide_faults(events, float(need) if need is not None else MIN_EVIDENCE_MAGNIFICATION)
    if case.kind != RADIOLOGY:  # a viewer kind without these facts
        return []
    source = (case.prompt or {}).get("source_series")
    return radiology_faults(events, str(source) if source else None, dict(inputs.get("frames_of_reference") or {}))


def _signature(e: dict[str, Any]) -> str:
    return f"{e['handler']}:{json.dumps(e.get('args', {}), sort_keys=True, separators=(',', ':'))}"


def reactions(
    events: list[dict[str, Any]],
    marks: list[dict[str, Any]],
    codes_at: Callable[[dict[str, Any]], set[Any]] | None = None,
) -> list[dict[str, Any]]:
    """What the agent did after each mark on one of its calls (a workflow fault, or a guard warning; `seq` and
    `code`), as intervention depths: 0 the marked call was refused, 1 it ran; 2 its next call was another call; 3 a
    later successful call of the same handler carried no mark of that code (`codes_at`: the codes a call carries;
    by default the marks at its `seq`)."""
    calls = [e for e in events if e.get("type") == "handler_call" and e.get("actor") == "agent"]
    index = {int(e["seq"]): n for n, e in enumerate(calls)}
    if codes_at is None:
        by_seq: dict[int, set[str]] = {}
        for m in marks:
            by_seq.setdefault(int(m["seq"]), set()).add(str(m["code"]))
        codes_at = lambda c: by_seq.get(int(c["seq"]), set())  # noqa: E731
    out = []
    for m in marks:
        n = index.get(int(m["seq"]))
        if n is None:
            continue
        e, later = calls[n], calls[n + 1 :]
        depth = 1 if e.get("ok") else 0
        if depth == 1 and later and _signature(later[0]) != _signature(e):
            depth = 2
            again = [c for c in later if c["handler"] == e["handler"] and c.get("ok")]
            if any(m["code"] not in codes_at(c) for c in again):
                depth = 3
        out.append({"code": m["code"], "seq": int(m["seq"]), "depth": depth})
    return out
