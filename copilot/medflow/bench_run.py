"""`medcopilot bench run`: episodes in parallel worker processes (or on a Dask cluster), resumable, with
results in SQLite and an HTML report.

Each episode writes its trace under
`RUN_DIR/episodes/<policy>[~<model>]/<track>[-<ops>][-paper]/b<budget>[-s<seed>][-<backend>]/r<repeat>/<case_id>/`
(the bracketed parts only when they differ from the defaults); its result row is inserted only once the
episode has finished (done, budget exhausted or error), keyed by (case, model, policy, track, operation set,
protocol, budget, backend, seed, repeat). Killing a run (even with SIGKILL) loses at most the episodes in
flight: the workers die with the coordinator, and an episode folder the project wrote (it holds the
`.medcopilot-episode` marker) is cleared and redone. Running it again skips every finished one (and says how
many), retries errored ones, and running it with another budget, seed, backend, model, protocol or repeat
count adds rows instead of reusing them. Two runs on one folder are serialised by `RUN_DIR/.lock`: the second
waits for the first and then skips what it finished.

A run refuses what it cannot score: the policy (and, for `openai`, the model service) is checked before the
first episode; an episode that fails is recorded with status `error` and its message, kept out of every
mean and shown as "error k/n". Each row keeps the parsed answer, each field's correctness and each evidence
check (`details`), and the process metrics of its trace (`process`), so every table of the report is
recomputed from `results.sqlite` alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.bench.scoring.rules import DEFAULT_RULES, rules_key
from copilot.cases.pack import find_cases
from copilot.medflow.runs import (
    DEFAULTS,
    KEY,
    MARKER,
    PROTOCOLS,
    ResultsDB,
    RunRefused,
    check_policy,
    clear_trace_dir,
    episode_dir,
    error_row,
    model_name,
    relative_to_run,
    run_lock,
)


class CallBudget:
    """The session as a policy sees it, with at most `budget` agent rounds (`unit` "rounds": Appendix H's
    "tool-calling rounds"; a model turn with all its tool calls is one round, and a policy without model turns
    spends one per call) or agent handler calls (`unit` "calls": Table 7's "explicit operation calls"). A call
    past the budget is refused (`budget_exhausted`, noted in the trace) without reaching the viewer."""

    def __init__(self, session: Any, budget: int, protocol: str = "harness", unit: str = "calls") -> None:
        self._session, self._budget, self.used, self.unit = session, budget, 0, unit
        self.protocol = protocol  # the prompts a model-driven policy uses (`agent.prompts.template`)
        self._turns, self._open = False, False  # a model turn was seen; the current one has spent its round

    def note(self, event_type: str, payload: dict[str, Any]) -> None:
        if event_type == "model_turn":  # a new round begins with each model turn
            self._turns, self._open = True, False
        self._session.note(event_type, payload)

    def call(self, name: str, args: dict[str, Any] | None = None, actor: str = "agent", **kw: Any) -> Any:
        if actor == "agent":
            new_round = self.unit == "calls" or not self._turns or not self._open
            if new_round and self.used >= self._budget:
                from copilot.trace.outcome import CallOutcome

                message = f"the budget of {self._budget} operation {self.unit} is spent; give the final answer now"
                self._session.note("call_refused", {"handler": name, "code": "budget_exhausted", "used": self.used})
                return CallOutcome(name, False, 429, error={"code": "budget_exhausted", "message": message})
            if new_round:
                self.used += 1
                self._open = True
        return self._session.call(name, args, actor=actor, **kw)

    @property
    def budget_spent(self) -> bool:
        """No further agent round or call can run: the agent loop stops offering tools and asks for the final
        answer, under a call budget exactly as under a round budget."""
        return self.used >= self._budget

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def run_episode(
    case_dir: str,
    policy_spec: str,
    run_dir: str,
    track: str = "A",
    budget: int = 20,
    trace_dir: str | Path | None = None,
    policy: Any = None,
    key: dict[str, Any] | None = None,
    rules: Any = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One episode end to end (in a worker): session with trace, policy (a model's `settings`: model, base URL,
    reasoning, tool protocol… as the command line gave them), score (by `rules`, the paper's reading when None);
    returns the result row."""
    from copilot.agent.policy import EpisodeResult
    from copilot.agent.prompts import task_prompt
    from copilot.bench.measures.process import episode_metrics, evidence_provenance
    from copilot.cases.pack import load_case
    from copilot.medflow import score_case
    from copilot.medflow.policies import make_policy
    from copilot.replay import read_events
    from copilot.runtime import open_session

    key = {**DEFAULTS, "model": model_name(policy_spec), **(key or {}), "policy": policy_spec, "track": track,
           "budget": budget}  # fmt: skip
    t0 = time.time()
    case = load_case(case_dir)  # the case id is checked there: a plain name, never a path
    if trace_dir is None:
        trace_dir = episode_dir(run_dir, policy_spec, track, key["ops"], budget, key["repeat"], case.case_id, key)
    trace_dir = Path(trace_dir).resolve()
    clear_trace_dir(trace_dir)  # an episode interrupted by a kill starts again
    trace_dir.mkdir(parents=True, exist_ok=True)
    (trace_dir / MARKER).write_text(json.dumps({k: key[k] for k in KEY}), encoding="utf-8")
    session = None
    try:
        policy = policy if policy is not None else make_policy(policy_spec, **(settings or {}))
        session = open_session(case, track=track, trace_dir=trace_dir, ops=key["ops"] or None, backend=key["backend"],
                               protocol=key["protocol"])  # fmt: skip
        prompt = task_prompt(case, budget, key["protocol"])
        session.note("task_prompt", {"system": prompt.system, "user": prompt.user})  # what the task asked, for audit
        unit = (rules or DEFAULT_RULES).unit_for(budget)
        result = policy.run(CallBudget(session, budget, key["protocol"], unit), case, budget)
    except Exception as exc:  # a failing episode is recorded, never fatal to the batch
        result = EpisodeResult("", "error", 0, f"{type(exc).__name__}: {exc}")
    provenance = None
    if session is not None and session.trace_dir is not None:
        provenance = evidence_provenance(session.trace_events(), result.response)
    score = score_case(case, result.response, provenance, rules)
    if session is not None:
        session.note(
            "score", {"task": score.task, "strict": score.strict, "loc": score.loc, "parse_error": score.parse_error}
        )
        session.close({"status": result.status, "response": result.response, "error": result.error})
    (trace_dir / "answer.txt").write_text(result.response, encoding="utf-8")
    events, broken = read_events(trace_dir) if session is not None else (None, None)  # read once: measures, page
    process = episode_metrics(events, case, score, budget) if events is not None else {}
    if events is not None and session is not None:  # code, case pack, prompt, tools, model: docs/metrics.md
        from copilot.medflow.provenance import episode_provenance, session_tools

        process["provenance"] = episode_provenance(case, events, session_tools(session))
    row = {
        "case_id": case.case_id,
        "module": case.module,
        **key,
        "status": result.status,
        "task": score.task,
        "strict": score.strict,
        "loc": score.loc,
        "parse_error": score.parse_error,
        "rounds": result.rounds,
        "response": result.response,
        "error": result.error,
        "trace_dir": relative_to_run(trace_dir, Path(run_dir)),
        "duration_s": round(time.time() - t0, 3),
        "finished_at": time.time(),
        "details": score.details,
        "process": process,
    }
    from copilot.bench.report.episode_page import write_episode_page

    write_episode_page(run_dir, row, events=events if broken is None else None)  # a broken chain: the page reads all
    return row


def _progress(n: int, total: int, row: dict[str, Any]) -> None:
    bar = "#" * int(30 * n / max(total, 1))
    state = row["status"] if row["status"] == "error" else f"{row['status']} strict={row['strict']:.2f}"
    print(f"\r[{bar:<30}] {n}/{total} {row['case_id']} {state}", end="\n" if n == total else "", file=sys.stderr,
          flush=True)  # fmt: skip


@dataclass
class BatchOutcome:
    """What a run did: every row of its configuration, and how many episodes ran, errored or were skipped."""

    rows: list[dict[str, Any]]
    ran: int = 0
    errored: int = 0
    skipped: int = 0


def run_batch(
    cases_root: str | Path,
    policy: str,
    run_dir: str | Path,
    workers: int = 1,
    scheduler: str | Any | None = None,
    track: str = "A",
    budget: int = 20,
    progress: Callable[[int, int, dict[str, Any]], None] | None = _progress,
    repeats: int = 1,
    model: str | None = None,
    seed: int = 0,
    backend: str = "embedded",
    ops: str | None = None,
    protocol: str = "harness",
    outcome: BatchOutcome | None = None,
    base_url: str | None = None,
    rules: Any = None,
    model_settings: dict[str, Any] | None = None,
    policy_checked: bool = False,
) -> list[dict[str, Any]]:
    """Run every not-yet-finished episode (cases × repeats); returns all rows of this configuration.

    The policy is checked first (RunRefused); `outcome`, when given, is filled with the counts. A model policy
    goes to `base_url` (every provider's wire) with `model_settings` (reasoning, tool protocol, images) and keys its
    rows by the model configuration it runs under."""
    if protocol not in PROTOCOLS:
        raise RunRefused(f"unknown protocol {protocol!r}; one of {', '.join(PROTOCOLS)}")
    if not policy_checked:  # `bench run` checks it before its preflight
        check_policy(policy, base_url)
    from copilot.tools.operation_sets import unavailable

    if track == "B" and (reason := unavailable(ops or "all")):  # what cannot be scored does not start
        raise RunRefused(reason)
    settings = {k: v for k, v in {**(model_settings or {}), "base_url": base_url}.items() if v is not None}
    config = model_config(policy, settings)
    run_dir = Path(run_dir).resolve()
    outcome = outcome if outcome is not None else BatchOutcome([])
    notice = (lambda m: print(m, file=sys.stderr, flush=True)) if progress else None
    with run_lock(run_dir, notice=notice):
        db = ResultsDB(run_dir / "results.sqlite")
        ops = ops if ops is not None else ("all" if track == "B" else "")
        base = {"model": model or model_name(policy), "policy": policy, "track": track, "budget": budget,
                "backend": backend, "seed": seed, "ops": ops, "protocol": protocol,
                "rules": rules_key(rules, budget), "config": config}  # fmt: skip
        try:
            problems: list[str] = []
            cases = find_cases(cases_root, problems)
            for problem in problems:  # a bad case pack is reported and skipped; the others run
                print(f"skipped: {problem}", file=sys.stderr)
            args = []
            for repeat in range(repeats):
                key = {**base, "repeat": repeat}
                finished = db.done(key)
                outcome.skipped += sum(1 for c in cases if c.case_id in finished)
                args += [(str(c.root), policy, str(run_dir), track, budget, None, None, key, rules, settings)
                         for c in cases if c.case_id not in finished]  # fmt: skip
            if outcome.skipped and progress:
                print(f"skipped {outcome.skipped} episodes already done in {run_dir}", file=sys.stderr)
            for n, row in enumerate(_execute(args, workers, scheduler), 1):
                db.insert(row)
                outcome.ran += 1
                outcome.errored += row["status"] == "error"
                if progress:
                    progress(n, len(args), row)
            rows = [r for r in db.rows() if all(r[k] == v for k, v in base.items())]
            from copilot.bench.report.run_report import write_report
            from copilot.medflow.registry import report_columns

            write_report(db.rows(), run_dir / "report.html", report_columns(), run_dir=run_dir)
            outcome.rows = rows
            return rows
        finally:
            db.close()


def model_config(policy: str, settings: dict[str, Any]) -> str:
    """The model configuration a model policy runs under, as its rows key it ("" for an offline policy): the same
    string the agent records in its trace header (`ChatAgent.config_key`)."""
    from copilot.llm.spec import is_model_policy

    if not is_model_policy(policy):
        return ""
    from copilot.agent.settings import AgentSettings

    return AgentSettings.for_policy(policy, **settings).config_key()


def _worker_init(parent: int) -> None:
    """A pool worker dies with its coordinator: the kernel kills it when the parent dies (Linux), and a
    watchdog thread ends it should it ever be re-parented."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _safe_episode(*args: Any) -> dict[str, Any]:
    """`run_episode`, with a failure before scoring turned into an error row (never fatal to the batch)."""
    try:
        return run_episode(*args)
    except Exception as exc:
        return error_row(args[0], args[7], f"{type(exc).__name__}: {' '.join(str(exc).split())}")


def _execute(args: list[tuple[Any, ...]], workers: int, scheduler: str | Any | None) -> Iterable[dict[str, Any]]:
    if not args:
        return
    if scheduler is not None:
        yield from _execute_dask(args, scheduler)
    elif workers <= 1:
        for a in args:
            yield _safe_episode(*a)
    else:
        with ProcessPoolExecutor(
            max_workers=min(workers, len(args)), initializer=_worker_init, initargs=(os.getpid(),)
        ) as pool:
            futures = {pool.submit(_safe_episode, *a): a for a in args}
            for fut in as_completed(futures):
                try:
                    yield fut.result()
                except Exception as exc:  # a worker that died (killed, out of memory)
                    a = futures[fut]
                    yield error_row(a[0], a[7], f"worker failed: {type(exc).__name__}: {exc}")


def _execute_dask(args: list[tuple[Any, ...]], scheduler: str | Any) -> Iterable[dict[str, Any]]:
    from dask.distributed import Client
    from dask.distributed import as_completed as dask_completed

    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    try:
        futures = [client.submit(_safe_episode, *a, pure=False) for a in args]
        for fut in dask_completed(futures):
            yield fut.result()
    finally:
        if client is not scheduler:
            client.close()
