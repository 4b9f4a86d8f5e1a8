"""Reflection-round improvement (ACP-Bench, Methods "Reflection validation"): did a later round of the agent's
work produce measurably better evidence than its first? Per episode, the evidence the agent recorded is grouped
by model round, each round's recordings are scored against the hidden truth (at scoring time, never shown to
the agent), and the final-versus-first delta of the rounds with comparable metrics is classed improved /
unchanged / worse; per run configuration the counts, as the seed reports them."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from copilot.bench.measures.configs import by_config, label
from copilot.bench.measures.failures import slide_target
from copilot.bench.scoring.scorers import Truth
from copilot.cases.pack import CasePack

FAMILIES = ("point", "key_slice")  # the comparable metric families, in the order one is chosen (the seed's priority)
EPSILON = 0.001  # the seed: Δ > 0.001 improved, Δ < −0.001 worse, otherwise unchanged
OUTCOMES = ("improved", "unchanged", "worse")


def call_rounds(events: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(round, call) for every agent call: the round of the model turn that asked for it; an offline policy
    (no model turns) makes each call a round of its own, numbered by the call's order."""
    out: list[tuple[int, dict[str, Any]]] = []
    current: int | None = None
    for e in events:
        if e.get("type") == "model_turn" and e.get("tool_calls"):
            current = int(e.get("round") or 0)
        elif e.get("type") == "handler_call" and e.get("actor") == "agent":
            out.append((current if current is not None else len(out) + 1, e))
    return out


def scored_recordings(events: list[dict[str, Any]], case: CasePack, truth: Truth) -> list[tuple[int, str, bool | None]]:
    """(round, family, inside the truth) for each evidence recording: a RAS point in the lesion mask, a key slice
    within the lesion's extent on its axis, a slide point in a target-class region. None: not scorable (a
    negative case, no mask, a view recorded without a point)."""
    target = slide_target(case, truth) if case.inputs.get("slide") else None
    out: list[tuple[int, str, bool | None]] = []
    for rnd, e in call_rounds(events):
        ev = (e.get("result") or {}).get("evidence") if e.get("ok") else None
        if not isinstance(ev, dict):
            continue
        kind = ev.get("kind")
        if kind == "point" and ev.get("ras") is not None:
            hit = truth.ras_hit(tuple(ev["ras"])) if truth.mask is not None and len(truth.mask_voxels) else None
            out.append((rnd, "point", hit))
        elif kind == "key_slice":
            axis, offset = str(ev.get("axis")), ev.get("offset_mm")
            scored = None
            if offset is not None and truth.slice_extent(axis) is not None:
                scored = truth.slice_in_extent(axis, float(offset))
            out.append((rnd, "key_slice", scored))
        elif kind == "view":
            point = ev.get("point")
            hit = None
            if isinstance(point, dict) and target is not None:
                hit = truth.wsi_hit(float(point["x"]), float(point["y"]), target[0], target[1])
            out.append((rnd, "point", hit))
    return out


def round_delta(recordings: Sequence[tuple[int, str, bool | None]]) -> dict[str, Any]:
    """The seed's final-versus-first delta: the first family (FAMILIES order) scored in at least two rounds, each
    round's metric the share of its scored recordings inside the truth, Δ = m_last − m_first; outcome None when
    no family is comparable (the episode stays in the evidence counts, not in the delta)."""
    out: dict[str, Any] = {
        "output_rounds": len({r for r, _, _ in recordings}),
        "family": None, "comparable_rounds": 0, "first": None, "last": None, "delta": None, "outcome": None,
    }  # fmt: skip
    for family in FAMILIES:
        per: dict[int, list[bool]] = {}
        for rnd, fam, hit in recordings:
            if fam == family and hit is not None:
                per.setdefault(rnd, []).append(hit)
        if len(per) < 2:
            continue
        rounds = sorted(per)
        first = sum(per[rounds[0]]) / len(per[rounds[0]])
        last = sum(per[rounds[-1]]) / len(per[rounds[-1]])
        delta = last - first
        outcome = "improved" if delta > EPSILON else "worse" if delta < -EPSILON else "unchanged"
        out.update(family=family, comparable_rounds=len(rounds), first=first, last=last, delta=delta, outcome=outcome)
        break
    return out


def episode_reflection(
    events: list[dict[str, Any]], case: CasePack, truth: Truth, reflect_turns: int
) -> dict[str, Any]:
    """One episode's reflection record: its rounds, its turns in the reflect stage, and the round delta."""
    rounds = {r for r, _ in call_rounds(events)}
    return {"rounds": len(rounds), "reflect_turns": reflect_turns,
            **round_delta(scored_recordings(events, case, truth))}  # fmt: skip


def reflection_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per run configuration: episodes, those with a recorded round output, with reflect-stage turns, with at
    least two comparable rounds; improved / unchanged / worse / not comparable, and the mean Δ over the
    comparable ones. A configuration whose rows predate the measure is left out (the report shows N/A)."""
    out: dict[str, dict[str, Any]] = {}
    for cfg, group in by_config(rows).items():
        recs = [(r.get("process") or {}).get("reflection") for r in group]
        known = [x for x in recs if isinstance(x, dict)]
        if not known:
            continue
        deltas = [float(x["delta"]) for x in known if x.get("outcome") is not None]
        out[label(cfg)] = {
            "episodes": len(known),
            "with_output": sum(1 for x in known if x.get("output_rounds", 0) >= 1),
            "with_reflection": sum(1 for x in known if x.get("reflect_turns", 0) >= 1),
            "comparable": len(deltas),
            **{o: sum(1 for x in known if x.get("outcome") == o) for o in OUTCOMES},
            "not_comparable": len(known) - len(deltas),
            "mean_delta": sum(deltas) / len(deltas) if deltas else None,
        }
    return out


def reflection_html(summary: dict[str, dict[str, Any]]) -> str:
    """The report's section; N/A when no configuration has comparable rounds."""
    head = (
        "<h3>Reflection rounds (ACP-Bench)</h3><p class=\"caption\">Rounds: model rounds (an offline policy: "
        "calls). A round's metric is the share of its evidence recordings inside the hidden truth (points first, "
        "else key slices); Δ = last − first over the episodes with at least two comparable rounds, improved above "
        "+0.001, worse below −0.001. Reflect: episodes with a turn after a refused or faulty call.</p>"
    )
    if not summary:
        return head + '<p class="muted">N/A: no episode of this run carries the reflection record.</p>'
    cols = ("episodes", "with_output", "with_reflection", "comparable", *OUTCOMES, "not_comparable")
    titles = ("episodes", "round output", "reflect", "≥2 comparable", *OUTCOMES, "not comparable", "mean Δ")
    body = "".join(
        f'<tr><td class="l">{html.escape(key)}</td>' + "".join(f"<td>{s[c]}</td>" for c in cols)
        + ("<td class=\"muted\">N/A</td>" if s["mean_delta"] is None else f"<td>{s['mean_delta']:+.2f}</td>") + "</tr>"
        for key, s in summary.items()
    )  # fmt: skip
    return (head + '<table class="reflection"><tr><th>Configuration</th>' + "".join(f"<th>{t}</th>" for t in titles)
            + f"</tr>{body}</table>")  # fmt: skip
