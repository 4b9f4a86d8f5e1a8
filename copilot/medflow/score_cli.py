"""`medcopilot bench score`: score answers from any pipeline (Track C included) against case packs."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from copilot.bench.scoring.rules import ScoringRules, rules_key
from copilot.bench.scoring.scorers import CaseScore, summarise
from copilot.cases.pack import CasePack
from copilot.medflow.registry import score_case


@dataclass
class AnswerFile:
    """The answers of a file, and every line that could not be used (reported, never dropped)."""

    answers: dict[str, str] = field(default_factory=dict)
    problems: list[dict[str, Any]] = field(default_factory=list)


def read_answers(path: str | Path) -> AnswerFile:
    """JSON lines {"case_id", "response"}; a later line for the same case replaces an earlier one (reported)."""
    out = AnswerFile()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such answers file") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for n, line in enumerate(text.split("\n"), 1):  # JSON strings may hold U+2028: split at \n only
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            cid, response = str(row["case_id"]), row["response"]
            if not isinstance(response, str):
                raise TypeError("response is not a string")
        except (KeyError, TypeError, IndexError, ValueError, RecursionError) as exc:
            out.problems.append({"line": n, "problem": f'expected {{"case_id", "response"}} ({exc})'})
            continue
        if cid in out.answers:
            out.problems.append({"line": n, "case_id": cid, "problem": "replaces an earlier answer for this case"})
        out.answers[cid] = response
    return out


def score_answers(
    cases: list[CasePack], answers: AnswerFile | dict[str, str], rules: ScoringRules | None = None
) -> list[CaseScore]:
    """Every case scored (a case without an answer scores 0 with that reason); `rules`: the scoring options of
    `copilot.bench.scoring.rules`."""
    given = answers.answers if isinstance(answers, AnswerFile) else answers
    scores = []
    for case in cases:
        if case.case_id in given:
            scores.append(score_case(case, given[case.case_id], rules=rules))
        else:
            s = score_case(case, "", rules=rules)
            s.parse_error = "no response for this case"
            scores.append(s)
    return scores


def unknown_ids(cases: list[CasePack], answers: AnswerFile) -> list[str]:
    known = {c.case_id for c in cases}
    return sorted(cid for cid in answers.answers if cid not in known)


def report_json(
    scores: list[CaseScore], answers: AnswerFile | None = None, cases: list[CasePack] | None = None
) -> dict[str, Any]:
    """Per case: scores, parsed answer, each field's correctness and each evidence check; the summary; problems."""
    out: dict[str, Any] = {"cases": [s.to_json() for s in scores], "summary": summarise(scores)}
    if answers is not None:
        out["unknown_case_ids"] = unknown_ids(cases or [], answers)
        out["problems"] = answers.problems
    return out


def format_table(summary: dict[str, dict[str, Any]]) -> str:
    """Fractions (0–1), as the paper's tables and `bench run` print them."""
    lines = [f"{'module':<18} {'n':>5} {'Task':>7} {'Strict':>7} {'Loc':>7} {'unparsed':>9}"]
    for module, row in summary.items():
        loc = "—" if row["loc"] is None else f"{row['loc']:.2f}"
        lines.append(
            f"{module:<18} {row['n']:>5} {row['task']:>7.2f} {row['strict']:>7.2f} {loc:>7} {row['parse_errors']:>9}"
        )
    return "\n".join(lines)


def track_ops(track: str, ops: str | None) -> str:
    """The operation set of scored answers: Track B names a known one (Table 3's columns are operation sets),
    the other tracks none; anything else is a ValueError before any scoring."""
    from copilot.tools.operation_sets import operation_sets

    if track != "B":
        if ops:
            raise ValueError(f"--ops is for Track B answers; these are Track {track}")
        return ""
    known = [n for n in operation_sets() if n != "none"] + ["none"]
    if not ops or ops not in known:
        raise ValueError(f"Track B answers need --ops, one of {', '.join(known)}")
    return ops


def result_rows(
    scores: list[CaseScore], answers: AnswerFile, model: str, track: str = "C", cases: list[CasePack] | None = None,
    ops: str = "",
) -> list[dict[str, Any]]:
    """Result rows for scored answers (Track C by default), keyed by the rules they were scored under (the
    departures each score recorded), ready for `ResultsDB.insert`; with `cases`, each row's provenance (code
    version and commit, case-pack digest)."""
    from copilot.medflow.provenance import case_digest, code_version

    now = time.time()
    packs = {c.case_id: c for c in cases or []}

    def process(cid: str) -> dict[str, Any]:
        if cid not in packs:
            return {}
        return {"provenance": {"code": code_version(), "case_digest": case_digest(packs[cid]), "prompt_sha256": None,
                               "tool_schema_sha256": None, "price_table": None, "profile": None,
                               "model_snapshots": [], "request": None}}  # fmt: skip

    return [
        {
            "case_id": s.case_id,
            "module": s.module,
            "model": model,
            "policy": "answers",
            "track": track,
            "ops": ops,
            "budget": 0,
            "backend": "none",
            "seed": 0,
            "repeat": 0,
            "rules": rules_key(ScoringRules(**s.details.get("rules", {}))),
            "status": "done" if s.case_id in answers.answers else "missing",
            "task": s.task,
            "strict": s.strict,
            "loc": s.loc,
            "parse_error": s.parse_error,
            "rounds": 0,
            "response": answers.answers.get(s.case_id, ""),
            "error": None,
            "trace_dir": "",
            "duration_s": 0.0,
            "finished_at": now,
            "details": s.details,
            "process": process(s.case_id),
        }
        for s in scores
    ]
