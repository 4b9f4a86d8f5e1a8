"""`medcopilot bench score`: score answers from any pipeline (Track C included) against case packs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from copilot.bench.scoring import CaseScore, summarise
from copilot.cases.pack import CasePack
from copilot.medflow.registry import score_case


def read_answers(path: str | Path) -> dict[str, str]:
    """JSON lines {"case_id", "response"}; a later line for the same case replaces an earlier one."""
    answers: dict[str, str] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            answers[str(row["case_id"])] = str(row["response"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f'{path}:{n}: expected {{"case_id", "response"}} ({exc})') from exc
    return answers


def score_answers(cases: list[CasePack], answers: dict[str, str]) -> list[CaseScore]:
    scores = []
    for case in cases:
        if case.case_id in answers:
            scores.append(score_case(case, answers[case.case_id]))
        else:
            s = score_case(case, "")
            s.parse_error = "no response for this case"
            scores.append(s)
    return scores


def report_json(scores: list[CaseScore]) -> dict[str, Any]:
    cases = [
        {
            "case_id": s.case_id,
            "module": s.module,
            "task": s.task,
            "strict": s.strict,
            "loc": s.loc,
            "parse_error": s.parse_error,
        }
        for s in scores
    ]
    return {"cases": cases, "summary": summarise(scores)}


def format_table(summary: dict[str, dict[str, Any]]) -> str:
    lines = [f"{'module':<18} {'n':>5} {'Task':>7} {'Strict':>7} {'Loc':>7} {'unparsed':>9}"]
    for module, row in summary.items():
        loc = "—" if row["loc"] is None else f"{100 * row['loc']:.1f}"
        lines.append(
            f"{module:<18} {row['n']:>5} {100 * row['task']:>7.1f} {100 * row['strict']:>7.1f} "
            f"{loc:>7} {row['parse_errors']:>9}"
        )
    return "\n".join(lines)
