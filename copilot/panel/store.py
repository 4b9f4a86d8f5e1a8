"""The clinician's Store (Qt-free): the session's evidence with the last question and its answer as a measurement
report (Comprehensive 3D SR), and each segment as a DICOM SEG, back to the study's PACS (or as files when the
study did not come from one); on a slide, its evidence as microscopy bulk annotations (GeoJSON for a slide file).

The same audited calls as a model's export: `plan_store` takes the answer's evidence into the session as the
clinician's records and asks each export's planner what it would write and where; the host shows those plans;
`run_store` then makes the calls as the clinician with consent to exactly those plans, or traces the refusal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from copilot.panel.answer_evidence import answer_evidence
from copilot.tools.writes import WritePlan, settle
from copilot.trace.outcome import CallOutcome

REPORT = "export_evidence_sr"
SEG = "export_dicom_seg"
SLIDE_ANNOTATIONS = "export_slide_annotations"


def nothing_to_store(session: Any) -> str:
    """Why the Store has nothing to offer on this session's study ('' when it can export): a kind whose handlers
    holds no export of the Store's (report, SEG, slide annotations) writes nothing outside the session."""
    if any(session.writes(name) for name in (REPORT, SEG, SLIDE_ANNOTATIONS)):
        return ""
    return f"{session.kind} studies offer no export to a PACS or files (no report, segmentation or annotation writer)"


@dataclass(frozen=True)
class StoreStep:
    """One export the Store would make: handler, arguments and what it would write where."""

    handler: str
    args: dict[str, Any]
    plan: WritePlan


@dataclass
class StorePlan:
    """Every export of one Store, and why an object could not be planned (e.g. no evidence yet)."""

    steps: list[StoreStep] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def to_pacs(self) -> bool:
        """Whether anything goes to a PACS (else only files are written)."""
        return any(not d.startswith("file:") for s in self.steps for d in s.plan.destinations)

    def title(self) -> str:
        return "Store to PACS" if self.to_pacs else "Export files"

    def lines(self) -> list[str]:
        """What the dialog lists: each object and where it goes, then what cannot be stored."""
        return [f"{n}. {s.plan.text()}" for n, s in enumerate(self.steps, 1)] + [f"not stored: {p}" for p in
                                                                               self.problems]  # fmt: skip


def _where(item: dict[str, Any]) -> tuple[Any, ...] | None:
    """What a point, distance or key slice is at (kind and coordinates to 0.01 mm), to know a restated one."""
    def mm(p: Any) -> tuple[float, ...]:
        return tuple(round(float(v), 2) for v in p)

    kind = item.get("kind")
    if kind == "point" and item.get("ras") is not None:
        return kind, mm(item["ras"])
    if kind == "distance" and item.get("a") and item.get("b"):
        return kind, mm(item["a"]["ras"]), mm(item["b"]["ras"])
    if kind == "key_slice" and item.get("view") is not None:
        return kind, item["view"], round(float(item.get("offset_mm") or 0.0), 2)
    return None


def take_answer_evidence(model: Any, ids: list[int] | None = None, stated: set[Any] | None = None) -> int:
    """Record the answers' stated points, distances and key slices in the session as the clinician's evidence (so
    the report holds them); they leave the answer-only list. An item an answer restates from a recorded one is
    that record, not a second one. `ids` gathers the records of the items at the places in `stated` (one answer's).
    How many were recorded."""
    kept: list[dict[str, Any]] = []
    taken = 0
    recorded = {_where(e): int(e.get("evidence_id") or 0) for e in model.session.evidence()}
    for item in model.answer_items:
        label = str(item.get("label") or "answer")[:200]
        where = _where(item)
        mine = ids is not None and (stated is None or where in stated)
        if where is not None and where in recorded:
            if mine and ids is not None:
                ids.append(recorded[where])
            continue
        if item.get("kind") == "point":
            out = model.act("record_point", {"ras": item["ras"], "label": label})
        elif item.get("kind") == "distance":
            out = model.act("measure_distance", {"ras_a": item["a"]["ras"], "ras_b": item["b"]["ras"],
                                                 "label": label})  # fmt: skip
        elif item.get("kind") == "key_slice":
            out = model.act("record_key_slice", {"view": item["view"], "offset": item["offset_mm"], "label": label})
        else:
            kept.append(item)
            continue
        if out.ok:
            taken += 1
            if mine and ids is not None:
                ids.append(int(out.result["evidence"]["evidence_id"]))
        else:
            kept.append(item)
    model.answer_items = kept
    return taken


def free_name(model: Any, stem: str) -> str:
    """An output name not yet written in the session's derived folder (`stem`, `stem_2`, …)."""
    folder = (model.session.trace_dir / "derived") if model.session.trace_dir is not None else None
    n = 1
    while True:
        name = stem if n == 1 else f"{stem}_{n}"
        if folder is None or not (folder / f"{name}.dcm").exists():
            return name
        n += 1


def answer_evidence_ids(model: Any, stated: list[int], answer: int = -1) -> list[int] | None:
    """The evidence of one answer (the last by default): the records made while its question ran (before the next
    question began) and those its text states; None when the host does not say where its answers began (then the
    report holds all the session's evidence)."""
    starts = getattr(model, "answer_from", None)
    if not model.answered or not isinstance(starts, list) or len(starts) != len(model.answered):
        return None
    n = answer % len(starts)
    upto = starts[n + 1] if n + 1 < len(starts) else None
    ids = {int(e.get("evidence_id") or 0) for e in model.session.evidence()}
    during = {i for i in ids if i > starts[n] and (upto is None or i <= upto)}
    return sorted(during | set(stated))


def plan_store(model: Any, answer: int = -1) -> StorePlan:
    """What the clinician's Store would write and where: the report (the last question and its answer, with that
    answer's evidence; `answer` picks another answer of the conversation, 0 the first) and a SEG per segment;
    nothing is written (nor traced when the study's kind offers no export). What is stored already is said, not
    offered again."""
    session = model.session
    if why := nothing_to_store(session):
        return StorePlan(problems=[why])
    if model.answered and not -len(model.answered) <= answer < len(model.answered):
        return StorePlan(problems=[f"there is no answer {answer + 1}: the conversation has {len(model.answered)}"])
    question, text = model.answered[answer] if model.answered else ("", "")
    stated: list[int] = []
    take_answer_evidence(model, stated, {_where(item) for item in answer_evidence(text, session.kind)})
    store = StorePlan()
    report = {"output_name": free_name(model, "clinician_report"), "question": question, "answer": text}
    if (ids := answer_evidence_ids(model, stated, answer)) is not None:
        report["evidence_ids"] = ids
    wanted: list[tuple[str, dict[str, Any]]] = [(REPORT, report)] if session.writes(REPORT) else []
    if session.writes(SLIDE_ANNOTATIONS):  # a slide: its points and recorded views' regions, as annotations
        wanted.append((SLIDE_ANNOTATIONS, {"output_name": free_name(model, "clinician_annotations")}))
    for seg in session.snapshot().get("segments") or []:
        stem = re.sub(r"[^A-Za-z0-9_-]+", "_", str(seg["name"])).strip("_")[:40] or "segment"
        wanted.append((SEG, {"segment": seg["id"], "output_name": free_name(model, f"{stem}_seg")}))
    for handler, args in wanted:
        plan = session.plan_write(handler, args, actor="clinician")
        if plan is not None:
            store.steps.append(StoreStep(handler, args, plan))
        else:  # the planner refuses: say why, from the same check the call would make
            store.problems.append(_why(session, handler, args))
    return store


def _why(session: Any, handler: str, args: dict[str, Any]) -> str:
    """Why an export cannot be planned: the call's own refusal (traced like any refused call; nothing written)."""
    out = session.call(handler, args, actor="clinician")
    named = {REPORT: "the report", SLIDE_ANNOTATIONS: "the slide annotations"}
    what = named.get(handler, f"segment {args.get('segment')}")
    return f"{what}: {(out.error or {}).get('message', 'refused')}"


def run_store(model: Any, store: StorePlan, decision: str, reason: str = "") -> list[CallOutcome]:
    """The clinician's answer to the Store dialog: `approve` makes each call with consent to the plan shown;
    `reject` (or `stop`) writes nothing and traces each declined write. Outcomes of the calls made."""
    session = model.session
    plans = [{"handler": s.handler, "args": s.args, "write": s.plan.to_json()} for s in store.steps]
    consents = [settle(session, s.plan, s.args, "clinician", decision) for s in store.steps]  # declines traced
    if decision != "approve":
        session.note("clinician_rejection", {"handler": "store", "writes": plans, "reason": reason or "declined"})
        return []
    session.note("clinician_approval", {"handler": "store", "writes": plans})
    steps = zip(store.steps, consents, strict=True)
    return [session.call(s.handler, s.args, actor="clinician", consent=c) for s, c in steps]


def store_with(
    model: Any, confirm: Callable[[StorePlan], tuple[str, str]], answer: int = -1
) -> tuple[StorePlan, list[CallOutcome]]:
    """The Store as a host runs it: plan (for `answer`, the last by default), let `confirm` show the plan and return
    (approve | reject | stop, reason), then write exactly that or nothing. Nothing to store: `confirm` is not
    asked."""
    plan = plan_store(model, answer)
    if not plan.steps:
        return plan, []
    decision, reason = confirm(plan)
    return plan, run_store(model, plan, decision, reason)


def outcome_words(outcome: CallOutcome) -> str:
    """One line on a Store call: the file and where it went, or why it was refused."""
    if outcome.ok:
        result = outcome.result or {}
        where = "stored in the PACS" if result.get("stored_to") == "pacs" else "written"
        return f"{result.get('file', outcome.name)}: {where}"
    return f"{outcome.name}: refused: {(outcome.error or {}).get('message', '')}"
