"""The paper's failure modes (Section 6, Appendix G) detected per episode from its trace, answer and hidden truth.

Each label carries the trace events (`seq`) that support it, so a reader can open the episode page at them:

- F1 objective drift: the rationale is about a structure the question did not ask about (a module's
  off-target structures named, none of its target structures);
- F2 pseudo-quantification: a size, distance or volume stated in the rationale with no measurement call
  whose result supports it within `REL_TOL` (or `ABS_TOL_MM` for lengths);
- F3 state misbinding: the state faults of the trace facts (stale view, off-source series, superseded node,
  unregistered fusion) on the agent's calls, the same whether or not a run-time guard warned;
- F4 discarding a correct candidate: the agent recorded a point inside the hidden lesion / target ROI and
  then answered with points none of which lie in it;
- F5 unobserved evidence: cited evidence on no view the agent was shown, or a recording of evidence no
  earlier image showed.

The definitions, tolerances and departures from the paper are in docs/metrics.md.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from copilot.bench.measures.trace_facts import STATE_FAULTS, workflow_faults
from copilot.bench.measures.trace_views import RAS_INDEX, TOL_MM, point_on_plane, shown_fields, shown_planes
from copilot.bench.scoring import parsers as P
from copilot.bench.scoring.module_facts import facts_of
from copilot.bench.scoring.scorers import Truth, norm_class
from copilot.cases.pack import CasePack

NAMES = {
    "F1": "objective drift",
    "F2": "pseudo-quantification",
    "F3": "state misbinding",
    "F4": "discarded correct candidate",
    "F5": "unobserved evidence",
}
OBSERVATION_FAULTS = frozenset({"unobserved_evidence"})
REL_TOL = 0.10  # a stated quantity is supported by a measurement within 10 % of it ...
ABS_TOL_MM = 1.0  # ... or, for a length, within 1 mm (one voxel at the benchmark's coarsest spacing is 2 mm)

_NUM = r"(\d+(?:\.\d+)?)"
_UNITS = {  # unit → (quantity kind, factor to mm / mm² / mm³)
    "mm": ("length", 1.0), "cm": ("length", 10.0), "µm": ("length", 1e-3), "um": ("length", 1e-3),
    "mm2": ("area", 1.0), "mm²": ("area", 1.0), "cm2": ("area", 100.0), "cm²": ("area", 100.0),
    "mm3": ("volume", 1.0), "mm³": ("volume", 1.0), "cm3": ("volume", 1e3), "cm³": ("volume", 1e3),
    "ml": ("volume", 1e3), "cc": ("volume", 1e3),
}  # fmt: skip
_SIZE_WORDS = re.compile(
    r"measur|diamet|size|sized|long|wide|width|length|across|extent|extend|volume|distance|thick|span|spd|"
    r"largest|axis|radius|\d\s*[x×]\s*\d",
    re.I,
)
_SIZED_NOUN = re.compile(r"\s*(?:-\s*)?(?:\w+\s+)?(lesion|mass|nodule|tumou?r|focus|cyst|node|deposit)", re.I)
# a slice position: an axis letter with ':' or '=' ("S: 10 mm"), or a position word, optionally with the letter
_POSITION_BEFORE = re.compile(
    r"(?:\b[SRA]\s*[:=]|\b(?i:slice|offset|at|level|position|z)(?:\s+[SRA])?\s*[:=]?)\s*[-+]?$"
)
_STRUCTURED_LINE = re.compile(r"(?im)^\s*[-*]?\s*(EVIDENCE|KEY_SLICE_\w+|RAS|ANSWER)\s*[:=].*$")


@dataclass
class Failure:
    """One failure label of an episode with the trace events that support it."""

    code: str
    name: str
    events: list[int] = field(default_factory=list)
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ----- the answer -----


def rationale(response: str) -> str:
    """The free text of an answer: without the structured EVIDENCE/ANSWER lines and JSON localizations."""
    text = _STRUCTURED_LINE.sub("", response)
    return re.sub(r'"localizations"\s*:\s*\[(?:[^\[\]]|\[[^\[\]]*\])*\]', "", text)


@dataclass(frozen=True)
class Quantity:
    """A size, distance or volume stated in a rationale, in mm / mm² / mm³."""

    kind: str
    value: float
    text: str


def stated_quantities(text: str) -> list[Quantity]:
    """Sizes stated in free text: a number with a length, area or volume unit; millimetres only in a sentence
    about size or before a lesion noun. Slice positions ("S: 10 mm", "slice at 21 mm") are not sizes;
    `25 x 18 mm` states two lengths."""
    out: list[Quantity] = []
    for sentence in re.split(r"(?<=[.;!?])\s+|\n", text):
        about_size = bool(_SIZE_WORDS.search(sentence))
        pattern = rf"{_NUM}(?:\s*[x×]\s*{_NUM})?\s*(mm²|mm2|mm³|mm3|cm²|cm2|cm³|cm3|mm|cm|µm|um|ml|cc)\b"
        for m in re.finditer(pattern, sentence, flags=re.I):
            if _POSITION_BEFORE.search(sentence[: m.start()]):
                continue
            # millimetres also name slice positions: they need a sentence about size or a noun right after
            # ("a 25 mm lesion"); centimetres, areas and volumes are sizes wherever they stand
            if m.group(3).lower() == "mm" and not (about_size or _SIZED_NOUN.match(sentence[m.end() :])):
                continue
            kind, factor = _UNITS[m.group(3).lower()]
            for g in (m.group(1), m.group(2)):
                if g is not None:
                    out.append(Quantity(kind, float(g) * factor, m.group(0)))
    return out


def measurements(events: list[dict[str, Any]]) -> list[tuple[str, float, int]]:
    """(kind, value in mm/mm³, seq) of every successful measurement call's result."""
    out: list[tuple[str, float, int]] = []
    for e in events:
        if e.get("type") != "handler_call" or not e.get("ok"):
            continue
        result = e.get("result") or {}
        ev: dict[str, Any] = result["evidence"] if isinstance(result.get("evidence"), dict) else {}
        if "distance_mm" in ev:
            out.append(("length", float(ev["distance_mm"]), e["seq"]))
        for key, kind in (("volume_mm3", "volume"), ("area_mm2", "area"), ("distance_mm", "length")):
            if isinstance(result.get(key), int | float) and not isinstance(result.get(key), bool):
                out.append((kind, float(result[key]), e["seq"]))
        if isinstance(result.get("volume_ml"), int | float):
            out.append(("volume", float(result["volume_ml"]) * 1e3, e["seq"]))
        extent = result.get("extent_ras")
        if isinstance(extent, dict):  # a segment's extent along each RAS axis measures its lengths
            out += [("length", float(hi) - float(lo), e["seq"]) for lo, hi in extent.values()]
    return out


def supported(q: Quantity, measured: list[tuple[str, float, int]]) -> int | None:
    """The seq of a measurement supporting a stated quantity, or None."""
    for kind, value, seq in measured:
        tol = max(REL_TOL * value, ABS_TOL_MM if kind == "length" else 0.0)
        if kind == q.kind and abs(q.value - value) <= tol:
            return seq
    return None


# ----- detectors -----


def _calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == "handler_call" and e.get("actor") == "agent"]


def _end_seq(events: list[dict[str, Any]]) -> int:
    return next((int(e["seq"]) for e in reversed(events) if e.get("type") == "episode_end"), -1)


def _prompt_seq(events: list[dict[str, Any]]) -> list[int]:
    return [int(e["seq"]) for e in events if e.get("type") == "task_prompt"][:1]


def _find(value: Any, key: str) -> str | None:
    """The first string under `key` anywhere in a nested result."""
    if isinstance(value, dict):
        if isinstance(value.get(key), str):
            return str(value[key])
        for v in value.values():
            if (found := _find(v, key)) is not None:
                return found
    elif isinstance(value, list):
        for v in value:
            if (found := _find(v, key)) is not None:
                return found
    return None


def intra_timepoint_registrations(events: list[dict[str, Any]], frames: dict[str, str]) -> list[int]:
    """Registrations of two series of the same time point (the same frame of reference): for a question across
    time points, the paper's G.1 drift into intra-timepoint alignment."""
    out = []
    for e in _calls(events):
        if e["handler"] != "register_volumes" or not e.get("ok"):
            continue
        fixed, moving = _find(e.get("result"), "fixed"), _find(e.get("result"), "moving")
        if fixed in frames and moving in frames and frames[fixed] == frames[moving]:
            out.append(int(e["seq"]))
    return out


def detect_drift(
    events: list[dict[str, Any]], module: str, text: str, frames: dict[str, str] | None = None
) -> Failure | None:
    """F1: the rationale names off-target structures of the module and none of its target structures, or, for a
    question across time points (the case names several frames of reference), a registration within one."""
    terms = f.structures if (f := facts_of(module)) is not None else None
    low = text.lower()
    intra = intra_timepoint_registrations(events, frames or {}) if len(set((frames or {}).values())) > 1 else []
    if intra:
        why = f"registration within one time point at call(s) {intra}; the question compares time points"
        return Failure("F1", NAMES["F1"], [*_prompt_seq(events), *intra], why)
    if not terms or not low.strip():
        return None
    off = [t for t in terms["off_target"] if t in low]
    if not off or any(t in low for t in terms["target"]):
        return None
    return Failure("F1", NAMES["F1"], [*_prompt_seq(events), _end_seq(events)],
                   f"the rationale is about {', '.join(off)}, not the structure asked about")  # fmt: skip


def detect_pseudo_quantification(events: list[dict[str, Any]], text: str) -> Failure | None:
    """F2: stated sizes with no supporting measurement call (within the documented tolerance)."""
    measured = measurements(events)
    unsupported = [q for q in stated_quantities(text) if supported(q, measured) is None]
    if not unsupported:
        return None
    near = sorted({seq for *_, seq in measured})
    stated = "; ".join(sorted({q.text for q in unsupported}))
    where = f"measurement calls at {near} do not support it" if near else "no measurement call"
    return Failure("F2", NAMES["F2"], [*near, _end_seq(events)], f"stated {stated}: {where}")


def detect_misbinding(faults: list[dict[str, Any]]) -> Failure | None:
    """F3: the state faults of the trace facts (`trace_facts.workflow_faults`): stale view, evidence off the
    source series, a superseded node, an unregistered fusion — whether or not a guard warned."""
    hits = [(int(f["seq"]), str(f["code"])) for f in faults if f["code"] in STATE_FAULTS]
    if not hits:
        return None
    codes = sorted({c for _, c in hits})
    return Failure("F3", NAMES["F3"], sorted({s for s, _ in hits}), f"faults: {', '.join(codes)}")


def unobserved_items(events: list[dict[str, Any]], cited: dict[str, Any]) -> list[str]:
    """Cited evidence items lying on no view the agent was shown (the system's opening views count)."""
    shown = [e for e in events if e.get("type") == "handler_call" and e.get("ok")]
    missing: list[str] = []
    if "key_slices" in cited:  # an EVIDENCE block: the key slices and RAS point it gives
        planes = [p for e in shown for p in shown_planes(e)]
        ras = cited["ras"]
        ras_seen = ras is not None and any(point_on_plane(ras, p) for p in planes)
        if ras is not None and not ras_seen:
            missing.append("RAS")
        for axis, value in cited["key_slices"].items():
            direct = any(p["axis"] == axis and abs(p["offset"] - value) <= TOL_MM for p in planes)
            if not (direct or (ras_seen and abs(ras[RAS_INDEX[axis]] - value) <= TOL_MM)):
                missing.append(f"KEY_SLICE_{axis}")
    for n, (x, y) in enumerate(cited.get("points", [])):
        fields = [f for e in shown for f in shown_fields(e)]
        if not any(f["region"][0] <= x <= f["region"][2] and f["region"][1] <= y <= f["region"][3] for f in fields):
            missing.append(f"point_{n + 1}")
    return missing


def detect_unobserved(
    events: list[dict[str, Any]], cited: dict[str, Any], faults: list[dict[str, Any]]
) -> Failure | None:
    """F5: cited evidence on no view shown, or a recording of a slice or point no earlier image showed."""
    missing = unobserved_items(events, cited)
    recorded = sorted({int(f["seq"]) for f in faults if f["code"] in OBSERVATION_FAULTS})
    if not missing and not recorded:
        return None
    parts = [f"cited {', '.join(missing)} on no view shown"] if missing else []
    if recorded:
        parts.append(f"{len(recorded)} recording(s) of evidence never shown")
    seqs = sorted(set(recorded) | ({_end_seq(events)} if missing else set()))
    return Failure("F5", NAMES["F5"], seqs, "; ".join(parts))


def slide_target(case: CasePack, truth: Truth) -> tuple[str, bool] | None:
    """The pathology target class and whether exclusion polygons apply; None when the slide is negative."""
    facts = facts_of(case.module)
    if facts is not None and facts.roi_label is not None:
        field, negative = facts.roi_label
        label = truth.data.get(field)
        return (str(label), False) if label and label != negative else None
    if truth.data.get("tumor_presence") == "tumor_present":
        return ("Tumor", True)
    return None


def _wsi_hit(truth: Truth, x: float, y: float, target: tuple[str, bool]) -> bool:
    cls, exclusion = target
    inside = any(norm_class(a.cls) == norm_class(cls) and a.contains(x, y) for a in truth.annotations)
    if inside and exclusion:
        inside = not any(a.cls.lower() == "exclusion" and a.contains(x, y) for a in truth.annotations)
    return inside


def detect_discarded_candidate(
    events: list[dict[str, Any]], case: CasePack, truth: Truth, cited: dict[str, Any]
) -> Failure | None:
    """F4: a recorded point lay in the lesion / target ROI, and no cited point does."""
    good: list[int] = []
    if "ras" in cited:  # volumes: the cited RAS point against the lesion mask
        if not cited.get("ras") or truth.mask is None:
            return None
        for e in _calls(events):
            ev = (e.get("result") or {}).get("evidence") if e.get("ok") else None
            if isinstance(ev, dict) and ev.get("kind") == "point" and truth.ras_hit(tuple(ev["ras"])):
                good.append(int(e["seq"]))
        answered_hit = truth.ras_hit(tuple(cited["ras"]))
    elif "points" in cited:  # a slide: the cited points against the target regions
        target = slide_target(case, truth)
        if target is None or not cited.get("points"):
            return None
        for e in _calls(events):
            ev = (e.get("result") or {}).get("evidence") if e.get("ok") else None
            point = ev.get("point") if isinstance(ev, dict) else None
            if isinstance(point, dict) and _wsi_hit(truth, float(point["x"]), float(point["y"]), target):
                good.append(int(e["seq"]))
        answered_hit = any(_wsi_hit(truth, x, y, target) for x, y in cited["points"])
    else:
        return None
    if not good or answered_hit:
        return None
    return Failure("F4", NAMES["F4"], [*good, _end_seq(events)],
                   f"recorded in the lesion at call(s) {good}; the answer cites elsewhere")  # fmt: skip


def detect_failures(
    events: list[dict[str, Any]], case: CasePack, response: str, truth: Truth | None = None,
    faults: list[dict[str, Any]] | None = None,
) -> list[Failure]:  # fmt: skip
    """Every failure label of one episode, in code order, from its trace facts (`faults`: computed when None)."""
    truth = truth if truth is not None else Truth(case)
    faults = faults if faults is not None else workflow_faults(events, case)
    text = rationale(response)
    cited = P.cited_evidence(response, case.module)
    found = [
        detect_drift(events, case.module, text, case.inputs.get("frames_of_reference") or {}),
        detect_pseudo_quantification(events, text),
        detect_misbinding(faults),
        detect_discarded_candidate(events, case, truth, cited),
        detect_unobserved(events, cited, faults),
    ]
    return [f for f in found if f is not None]
