"""`.eval` logs of `medcopilot/medflow` as result rows of a run's `results.sqlite`, and result rows as `.eval` logs,
so the paper's tables come from either and Inspect's viewer shows any run.

A sample's `medflow` score carries the episode's row: Task/Strict/Loc as its value (Loc NaN where the module does
not score it), the answer, and every other column in its metadata. A sample that failed before it was scored
becomes an error row (kept out of every mean, as `bench run` keeps its own). Rows go back one log per run
configuration and module, each repeat an epoch.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalMetric,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    read_eval_log,
    write_eval_log,
)
from inspect_ai.model import ChatMessageAssistant, ModelOutput
from inspect_ai.scorer import Score

from copilot.bench.scoring.rules import rules_key
from copilot.integrations.inspect_task import POLICY_PREFIX, SCORER, model_of, policy_of
from copilot.medflow.runs import COLUMNS, DEFAULTS, KEY, policy_slug, relative_to_run

TASK = "medcopilot/medflow"
METRICS = ("task", "strict", "loc")
FILLED: dict[str, Any] = {"status": "done", "parse_error": None, "rounds": 0, "error": None, "trace_dir": "",
                          "duration_s": 0.0, "finished_at": 0.0, "details": {}, "process": {}}  # fmt: skip


def _number(v: Any) -> float | None:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
        return None
    return float(v)


def _error_row(log: EvalLog, sample: EvalSample) -> dict[str, Any]:
    """The row of a sample that ended before it was scored, keyed from the task's arguments."""
    args = log.eval.task_args or {}
    budget, track = int(args.get("budget", 20)), str(args.get("track", "A"))
    error = sample.error.message if sample.error is not None else "not scored"
    return {**DEFAULTS, **FILLED, "case_id": str(sample.id), "module": str(sample.metadata.get("module", "unknown")),
            "model": model_of(log.eval.model), "policy": policy_of(log.eval.model), "track": track,
            "ops": str(args.get("ops") or ("all" if track == "B" else "")),
            "protocol": str(args.get("protocol", "paper")),
            "budget": budget, "backend": str(args.get("backend", "embedded")), "repeat": sample.epoch - 1,
            "rules": rules_key(None, budget), **_episode(sample), "status": "error", "task": 0.0, "strict": 0.0,
            "loc": None, "response": "", "error": error, "finished_at": time.time()}  # fmt: skip


def _episode(sample: EvalSample) -> dict[str, Any]:
    """What the solver kept of an episode that was not scored (its trace folder, its rounds)."""
    kept = (sample.store or {}).get("medflow")
    return {k: v for k, v in kept.items() if k in COLUMNS} if isinstance(kept, dict) else {}


def log_rows(log: EvalLog | str | Path, run_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """The result rows of a `medcopilot/medflow` log (a log of another task is refused by name); with `run_dir`,
    the rows' trace folders are named from that run folder (absolute where the task wrote them elsewhere)."""
    where = str(log) if not isinstance(log, EvalLog) else log.location
    if not isinstance(log, EvalLog):
        if not Path(log).is_file():
            raise ValueError(f"no such Inspect log: {log}")
        log = read_eval_log(str(log))
    rows = []
    for sample in log.samples or []:
        score = (sample.scores or {}).get(SCORER)
        meta = score.metadata if score is not None else None
        if score is None or not isinstance(meta, dict) or "policy" not in meta:
            if sample.error is None:
                raise ValueError(f"{where}: sample {sample.id} has no {SCORER} score; not a {TASK} log")
            rows.append(_error_row(log, sample))
            continue
        value = score.value if isinstance(score.value, dict) else {}
        row = {**DEFAULTS, **FILLED, **{c: meta[c] for c in COLUMNS if c in meta}}
        row.update(task=_number(value.get("task")) or 0.0, strict=_number(value.get("strict")) or 0.0,
                   loc=_number(value.get("loc")), response=score.answer or "")  # fmt: skip
        rows.append(row)
    written = (log.eval.metadata or {}).get("run_dir")  # where the task wrote its episodes
    if run_dir is not None and written:
        for row in rows:
            if row["trace_dir"]:
                row["trace_dir"] = relative_to_run(Path(written) / row["trace_dir"], Path(run_dir))
    return rows


def eval_model(row: dict[str, Any]) -> str:
    """The Inspect model name of a row: its own for an Inspect run, `PROVIDER/MODEL` for a model policy, and
    `medcopilot/POLICY` for an offline one."""
    policy = str(row["policy"])
    if policy.startswith(POLICY_PREFIX):
        return policy[len(POLICY_PREFIX) :]
    provider, sep, _ = policy.partition(":")
    return f"{provider}/{row['model']}" if sep else f"medcopilot/{policy_slug(policy)}"


def _sample(row: dict[str, Any], model: str) -> EvalSample:
    response = str(row.get("response") or "")
    value = {"task": row["task"], "strict": row["strict"], "loc": math.nan if row.get("loc") is None else row["loc"]}
    meta = {k: v for k, v in row.items() if k not in (*METRICS, "response")}
    score = Score(value=value, answer=response, explanation=row.get("parse_error"), metadata=meta)
    return EvalSample(id=str(row["case_id"]), epoch=int(row.get("repeat", 0)) + 1,
                      input=f"MedFlow-Bench {row['module']} case {row['case_id']}", target="",
                      messages=[ChatMessageAssistant(content=response)],
                      output=ModelOutput.from_content(model, response), scores={SCORER: score},
                      metadata={"module": row["module"]})  # fmt: skip


def _results(rows: list[dict[str, Any]]) -> EvalResults:
    """Means of the scored rows (errors kept out, as in the tables), one score per metric."""
    scored = [r for r in rows if r.get("status") != "error"]
    scores = []
    for k in METRICS:
        values = [v for r in scored if (v := _number(r.get(k))) is not None]
        metrics = {"mean": EvalMetric(name="mean", value=sum(values) / len(values) if values else 0.0)}
        scores.append(EvalScore(name=k, scorer=SCORER, scored_samples=len(values),
                                unscored_samples=len(rows) - len(values), metrics=metrics))  # fmt: skip
    return EvalResults(total_samples=len(rows), completed_samples=len(scored), scores=scores)


def rows_log(rows: list[dict[str, Any]]) -> EvalLog:
    """One run configuration's rows of one module as an Inspect log."""
    first = rows[0]
    model = eval_model(first)
    args = {"module": first["module"], "track": first["track"], "protocol": first["protocol"],
            "budget": first["budget"], "ops": first["ops"], "backend": first["backend"]}  # fmt: skip
    spec = EvalSpec(created=datetime.now(UTC).isoformat(timespec="seconds"), task=TASK, task_args=args,
                    dataset=EvalDataset(name=f"medflow_{first['module']}", samples=len({r["case_id"] for r in rows})),
                    model=model, config=EvalConfig(epochs=max(int(r.get("repeat", 0)) for r in rows) + 1),
                    metadata={k: first.get(k) for k in KEY if k != "repeat"})  # fmt: skip
    samples = [_sample(r, model) for r in sorted(rows, key=lambda r: (r["case_id"], r.get("repeat", 0)))]
    return EvalLog(status="success", eval=spec, results=_results(rows), samples=samples)


def rows_logs(rows: list[dict[str, Any]]) -> list[EvalLog]:
    """Rows as logs: one per run configuration (every key column but the repeat) and module."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(*(r.get(k, DEFAULTS.get(k)) for k in KEY if k != "repeat"), r["module"])].append(r)
    return [rows_log(g) for g in groups.values()]


def write_logs(rows: list[dict[str, Any]], out_dir: str | Path) -> list[Path]:
    """Write the rows' logs into `out_dir`, one `.eval` file each, named by model, configuration and module."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for log in rows_logs(rows):
        r = log.samples[0].scores[SCORER].metadata if log.samples else {}
        name = "_".join(policy_slug(str(p)) for p in (log.eval.model.replace("/", "-"), r.get("track"),
                        r.get("protocol"), f"b{r.get('budget')}", r.get("module")))  # fmt: skip
        path = out / f"{name}.eval"
        n = 2
        while path in paths:  # configurations that differ only in a column the name leaves out
            path, n = out / f"{name}_{n}.eval", n + 1
        write_eval_log(log, str(path))
        paths.append(path)
    return paths
