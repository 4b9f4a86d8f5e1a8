"""MedHarnessBench's single-fault perturbations (seed 001, Section 5.3): one controlled failure injected into a
clean episode's trace, the final answer and unrelated evidence kept, then the seven process dimensions
recomputed, to test that each dimension moves for its own fault and little for the others.

Each fault is declared once (`FAULTS`: the dimension it targets, what it does, where it applies); applying it
is deterministic, so a perturbed trace is replayed by applying the same fault to the same clean trace. The
perturbed trace is a valid hash chain whose header records `perturbation` (fault, target, clean trace).
The analysis (`fault_statistics`, of these faults and of rows labelled with a fault by hand) gives, per fault,
the detection rate (pairs whose target dimension dropped), each dimension's mean drop, the mean target drop and
selectivity margin with 95 % bootstrap intervals, and the fault localisation (largest drop) scored by balanced
accuracy and macro-F1 with a label-permutation p-value.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.bench.measures import dimensions as D
from copilot.bench.measures.configs import config_of, label
from copilot.bench.measures.trace_facts import SOURCE_CHECKED
from copilot.bench.measures.workflow_audit import balanced_accuracy, macro_f1
from copilot.bench.scoring.stats import bootstrap_ci
from copilot.cases.pack import CasePack
from copilot.kind_names import PATHOLOGY
from copilot.trace.recorder import GENESIS, canonical_json, event_hash

PERMUTATIONS = 1000
PERMUTATION_SEED = 20261
Events = list[dict[str, Any]]


@dataclass(frozen=True)
class Fault:
    """One single-fault intervention: its target dimension, what it does, and the transform (None: does not
    apply to this episode)."""

    name: str
    target: str
    does: str
    apply: Callable[[Events, CasePack], Events | None]


def _agent(events: Events) -> list[int]:
    return [n for n, e in enumerate(events) if e.get("type") == "handler_call" and e.get("actor") == "agent"]


def _end(events: Events) -> int | None:
    return next((n for n in range(len(events) - 1, -1, -1) if events[n].get("type") == "episode_end"), None)


def _unfinished(events: Events, case: CasePack) -> Events | None:
    n = _end(events)
    if n is None or events[n].get("status") != "done":
        return None
    events[n]["status"] = "budget_exhausted"
    return events


def _redundant(events: Events, case: CasePack) -> Events | None:
    for n in _agent(events):
        e = events[n]
        if e.get("ok") and e["handler"] not in D.OPERATORS | D.VIEW_STATE_CHANGES:
            events.insert(n + 1, copy.deepcopy(e))
            return events
    return None


def _wrong_series(events: Events, case: CasePack) -> Events | None:
    source = (case.prompt or {}).get("source_series")
    names = [Path(str(p)).name.split(".")[0] for p in (case.inputs or {}).get("volumes") or []]
    other = next((v for v in names if v != source), None)
    if not source or other is None:
        return None
    for n in _agent(events):
        e = events[n]
        result = e.get("result") if isinstance(e.get("result"), dict) else None
        if not e.get("ok") or e["handler"] not in SOURCE_CHECKED or result is None:
            continue
        ev = result.get("evidence") if isinstance(result.get("evidence"), dict) else result
        if ev.get("volume") == source:
            ev["volume"] = other
            return events
    return None


def _order_swapped(events: Events, case: CasePack) -> Events | None:
    kind = D.PATHOLOGY if case.kind == PATHOLOGY else D.RADIOLOGY
    _, pred, succ, _ = D.PRECEDENCE[kind][0]  # look before recording
    calls = _agent(events)
    first = next((n for n in calls if events[n].get("ok") and events[n]["handler"] in succ), None)
    if first is None or not any(events[m]["handler"] in pred and events[m].get("ok") for m in calls if m < first):
        return None
    moved = events.pop(first)
    events.insert(calls[0], moved)
    return events


def _unlogged(events: Events, case: CasePack) -> Events | None:
    for n in reversed(_agent(events)):
        if events[n].get("ok") and events[n].get("result"):
            events[n]["result"] = None
            return events
    return None


def _appended(events: Events, call: dict[str, Any]) -> Events | None:
    calls = _agent(events)
    n = _end(events)
    if not calls or n is None:
        return None
    last = events[calls[-1]]
    events.insert(n, {"type": "handler_call", "actor": "agent", "images": [], "state": last.get("state"),
                      "time": last.get("time"), **call})  # fmt: skip
    return events


def _unverified(events: Events, case: CasePack) -> Events | None:
    calls = _agent(events)
    state = (events[calls[-1]].get("state") or {}) if calls else {}
    if case.kind == PATHOLOGY:
        call = {"handler": "set_image_type", "args": {"image_type": state.get("image_type") or "BRIGHTFIELD_H_E"}}
    else:
        call = {"handler": "select_volume", "args": {"volume_name": state.get("active_volume_name") or ""}}
    return _appended(events, {**call, "ok": True, "result": {}})


def _out_of_bounds(events: Events, case: CasePack) -> Events | None:
    error = {"code": "path_outside_case", "message": "the path leads outside the case folder"}
    return _appended(events, {"handler": "load_image" if case.kind == PATHOLOGY else "import_dicom",
                              "args": {"path": "../hidden"}, "ok": False, "error": error})  # fmt: skip


FAULTS: dict[str, Fault] = {f.name: f for f in (
    Fault("unfinished_episode", "F", "the episode ends on its budget instead of a finished answer", _unfinished),
    Fault("redundant_call", "R", "the first successful non-state-changing call repeated in the same state",
          _redundant),
    Fault("wrong_series", "E", "the first evidence read on the source series reported from another series "
          "(modules with a source series)", _wrong_series),
    Fault("order_swapped", "W", "the first recording moved before the first look", _order_swapped),
    Fault("unlogged_output", "A", "the result of the last successful call not recorded", _unlogged),
    Fault("unverified_change", "V", "a viewer-state change before the answer, never looked at", _unverified),
    Fault("out_of_bounds_call", "B", "a call refused as reaching outside the case (critical)", _out_of_bounds),
)}  # fmt: skip


def rechain(events: Events) -> Events:
    """Renumber and re-hash events as a recorder writes them, so the perturbed trace is a valid chain."""
    prev, out = GENESIS, []
    for n, e in enumerate(events):
        event = {k: v for k, v in e.items() if k not in ("hash", "prev", "seq")}
        event = {"seq": n, "prev": prev, **event}
        event["hash"] = event_hash(event)
        prev = hashlib.sha256(canonical_json(event).encode("utf-8")).hexdigest()
        out.append(event)
    return out


def perturb(events: Events, fault: str, case: CasePack, source: str = "") -> Events | None:
    """The clean trace with one fault injected (None when the fault does not apply); the header records it."""
    f = FAULTS[fault]
    done = f.apply(copy.deepcopy(events), case)
    if done is None:
        return None
    if done and done[0].get("type") == "episode_start":
        done[0]["perturbation"] = {"fault": f.name, "target": f.target, "does": f.does, "clean_trace": source}
    return rechain(done)


def write_trace(path: Path, events: Events) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(canonical_json(e) + "\n" for e in events), encoding="utf-8")


# ----- analysis -----


def _dims(r: dict[str, Any]) -> dict[str, float]:
    dims = (r.get("process") or {}).get("dimensions") or {}
    return {d: float(v["score"]) for d, v in dims.items() if isinstance(v, dict) and v.get("score") is not None}


def _balanced(strata: dict[tuple[str, str], list[tuple[float, float | None]]]) -> dict[str, Any]:
    """A fault's detection rate, target drop and margin as the mean of its strata's means (strata listed with
    their pairs); the means pooled over pairs are kept beside them as `*_pooled`."""
    if not strata:
        return {"strata": [], "detection_rate": None, "target_drop": None, "selectivity_margin": None}

    def over(values: list[float | None]) -> float | None:
        vs = [v for v in values if v is not None]
        return sum(vs) / len(vs) if vs else None

    per = {k: (over([float(d > 1e-12) for d, _ in v]), over([d for d, _ in v]), over([m for _, m in v]))
           for k, v in sorted(strata.items())}  # fmt: skip
    return {
        "strata": [{"configuration": c, "module": m, "pairs": len(strata[(c, m)])} for c, m in per],
        "detection_rate": over([x[0] for x in per.values()]),
        "target_drop": over([x[1] for x in per.values()]),
        "selectivity_margin": over([x[2] for x in per.values()]),
    }


def _confusion(truth: list[str], pred: list[str]) -> dict[str, Any]:
    """The localisation's confusion matrix (target → predicted → pairs) and each target dimension's recall."""
    dims = [d for d in D.DIMENSIONS if d in truth or d in pred]
    matrix = {t: {p: sum(1 for a, b in zip(truth, pred, strict=True) if (a, b) == (t, p)) for p in dims}
              for t in dims if t in truth}  # fmt: skip
    recall = {t: row[t] / sum(row.values()) for t, row in matrix.items() if sum(row.values())}
    return {"confusion": matrix, "recall": recall}


def _permutation_p(truth: list[str], pred: list[str], observed: float | None) -> float | None:
    """Share of label permutations whose balanced accuracy reaches the observed one ((1 + k) / (1 + N))."""
    if observed is None or len(set(truth)) < 2:
        return None
    rng = random.Random(PERMUTATION_SEED)
    shuffled, hits = list(pred), 0
    for _ in range(PERMUTATIONS):
        rng.shuffle(shuffled)
        hits += (balanced_accuracy(truth, shuffled) or 0.0) >= observed - 1e-12
    return (1 + hits) / (1 + PERMUTATIONS)


LABELLED = {  # faults rows may carry by hand (never injected here) and the dimension each is meant to move
    "stale_view": "V",  # the view changed under the agent, unverified
    "registration_misset": "W",  # a fusion whose registration step is wrong or missing
}


def fault_target(name: str) -> str | None:
    """The dimension a fault is meant to move: an injected fault's (`FAULTS`) or a hand-labelled one's."""
    f = FAULTS.get(name)
    return f.target if f is not None else LABELLED.get(name)


def fault_statistics(clean: list[dict[str, Any]], perturbed: list[dict[str, Any]]) -> dict[str, Any]:
    """Per fault over its (clean, perturbed) pairs of one configuration, case, repeat and seed whose target dimension
    is defined on both: pairs, detection rate (target drop > 0), the mean drop ΔS_d = S_d(clean) − S_d(perturbed) of
    every dimension defined on both, the mean target drop and selectivity margin m = ΔS_d* − max_{d ≠ d*} ΔS_d with
    95 % bootstrap intervals over pairs; the detection rate, target drop and margin are balanced as seed 001
    balances by benchmark: the mean over (configuration, module) strata of each stratum's mean, so no stratum
    outweighs another by its size (the pooled means beside them); over all pairs, localisation by the largest
    drop (ties in F…B order): the confusion matrix (target × predicted), each dimension's recall, balanced
    accuracy and macro-F1 against the target, with the permutation p-value."""
    key = lambda r: (config_of(r), r["case_id"], r.get("repeat", 0), r.get("seed", 0))  # noqa: E731
    by_key = {key(r): r for r in clean}
    drops: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    margins: dict[str, list[float]] = defaultdict(list)
    strata: dict[str, dict[tuple[str, str], list[tuple[float, float | None]]]] = defaultdict(lambda: defaultdict(list))
    truth: list[str] = []
    pred: list[str] = []
    for r in perturbed:
        name = str(r.get("perturbation"))
        target = fault_target(name)
        base = by_key.get(key(r))
        if target is None or base is None:
            continue
        a, b = _dims(base), _dims(r)
        delta = {d: a[d] - b[d] for d in D.DIMENSIONS if d in a and d in b}
        if target not in delta:
            continue
        for d, v in delta.items():
            drops[name][d].append(v)
        others = [v for d, v in delta.items() if d != target]
        margin = delta[target] - max(others) if others else None
        if margin is not None:
            margins[name].append(margin)
        strata[name][(label(config_of(r)), str(r.get("module") or ""))].append((delta[target], margin))
        truth.append(target)
        pred.append(max((d for d in D.DIMENSIONS if d in delta), key=lambda d: delta[d]))
    per = {}
    for name in [*FAULTS, *(n for n in drops if n not in FAULTS)]:
        target = fault_target(name) or ""
        ds, ms = drops[name][target] if name in drops else [], margins.get(name, [])
        per[name] = {
            "target": target,
            "pairs": len(ds),
            "detection_rate_pooled": sum(d > 1e-12 for d in ds) / len(ds) if ds else None,
            "mean_drop": {d: sum(v) / len(v) for d, v in drops[name].items()} if name in drops else {},
            "target_drop_pooled": sum(ds) / len(ds) if ds else None,
            "target_drop_ci": bootstrap_ci(ds),
            "selectivity_margin_pooled": sum(ms) / len(ms) if ms else None,
            "selectivity_margin_ci": bootstrap_ci(ms),
            **_balanced(strata.get(name, {})),
        }
    bal = balanced_accuracy(truth, pred)
    return {
        "faults": per,
        "localisation": {
            "pairs": len(truth),
            "balanced_accuracy": bal,
            "macro_f1": macro_f1(truth, pred),
            "permutation_p": _permutation_p(truth, pred, bal),
            **_confusion(truth, pred),
        },
    }


PERTURBATIONS_FILE = "perturbations.jsonl"


def read_perturbations(run_dir: str | Path | None) -> list[dict[str, Any]]:
    """The perturbed episodes `bench perturb` wrote into a run folder (none when it has not run)."""
    path = Path(run_dir) / PERTURBATIONS_FILE if run_dir is not None else None
    if path is None or not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def p_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def statistics_html(stats: dict[str, Any]) -> str:
    """The report's section: per fault the detection rate, target drop and selectivity margin with their
    intervals; the localisation scores."""
    import html

    def f(v: Any, ci: Any = None) -> str:
        text = "—" if v is None else f"{v:.2f}"
        return text + (f' <span class="muted">[{ci[0]:.2f}, {ci[1]:.2f}]</span>' if ci else "")

    body = "".join(
        f'<tr><td class="l">{html.escape(name)}</td><td>{s["target"]}</td><td>{s["pairs"]}</td>'
        f"<td>{f(s['detection_rate'])}</td><td>{f(s['target_drop'], s['target_drop_ci'])}</td>"
        f"<td>{f(s['selectivity_margin'], s['selectivity_margin_ci'])}</td></tr>"
        for name, s in stats["faults"].items()
        if s["pairs"]
    )
    loc = stats["localisation"]
    return (
        '<h3 id="perturbations">Single-fault perturbations (MedHarnessBench)</h3><table class="perturb"><tr>'
        "<th>Fault</th><th>Target</th><th>pairs</th><th>detected</th><th>target drop [95% CI]</th>"
        f"<th>selectivity margin [95% CI]</th></tr>{body}</table><p class=\"caption\">Fault localisation by the "
        f"largest drop over {loc['pairs']} pairs: balanced accuracy {f(loc['balanced_accuracy'])}, macro-F1 "
        f"{f(loc['macro_f1'])}, permutation p = {p_text(loc['permutation_p'])}; recall "
        + html.escape(", ".join(f"{d} {v:.2f}" for d, v in (loc.get("recall") or {}).items()) or "—")
        + ". Detection, drop and margin: the mean over (configuration, module) strata.</p>"
    )
