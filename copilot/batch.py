"""`medcopilot bench run`: episodes in parallel worker processes (or on a Dask cluster), resumable, with
results in SQLite and an HTML report.

Each episode writes its trace under `RUN_DIR/episodes/<case_id>/`; its result row is inserted only once
the episode has finished (done, budget exhausted or error), keyed by (case, policy, track). Killing a
run loses at most the episodes in flight; running it again skips every finished one, so each case
ends with exactly one result.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from copilot.cases.pack import find_cases

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    case_id TEXT NOT NULL, module TEXT NOT NULL, policy TEXT NOT NULL, track TEXT NOT NULL,
    status TEXT NOT NULL, task REAL NOT NULL, strict REAL NOT NULL, loc REAL, parse_error TEXT,
    rounds INTEGER NOT NULL, response TEXT NOT NULL, error TEXT, trace_dir TEXT NOT NULL,
    duration_s REAL NOT NULL, finished_at REAL NOT NULL,
    PRIMARY KEY (case_id, policy, track)
)"""
COLUMNS = (
    "case_id",
    "module",
    "policy",
    "track",
    "status",
    "task",
    "strict",
    "loc",
    "parse_error",
    "rounds",
    "response",
    "error",
    "trace_dir",
    "duration_s",
    "finished_at",
)


class ResultsDB:
    """One row per (case, policy, track); written by the coordinating process only."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(SCHEMA)
        self.conn.commit()

    def done(self, policy: str, track: str) -> set[str]:
        rows = self.conn.execute("SELECT case_id FROM results WHERE policy = ? AND track = ?", (policy, track))
        return {r[0] for r in rows}

    def insert(self, row: dict[str, Any]) -> None:
        self.conn.execute(
            f"INSERT OR REPLACE INTO results ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})",
            [row[c] for c in COLUMNS],
        )
        self.conn.commit()

    def rows(self) -> list[dict[str, Any]]:
        cur = self.conn.execute(f"SELECT {', '.join(COLUMNS)} FROM results ORDER BY policy, track, module, case_id")
        return [dict(zip(COLUMNS, r, strict=True)) for r in cur]

    def close(self) -> None:
        self.conn.close()


def run_episode(
    case_dir: str,
    policy_spec: str,
    run_dir: str,
    track: str = "A",
    budget: int = 20,
    trace_dir: str | Path | None = None,
    policy: Any = None,
) -> dict[str, Any]:
    """One episode end to end (in a worker): session with trace, policy, score; returns the result row."""
    from copilot.agent.policy import EpisodeResult
    from copilot.cases.pack import load_case
    from copilot.medflow import score_case
    from copilot.medflow.policies import make_policy
    from copilot.runtime import open_session

    t0 = time.time()
    case = load_case(case_dir)
    if trace_dir is None:
        trace_dir = Path(run_dir) / "episodes" / policy_slug(policy_spec) / track / case.case_id
    trace_dir = Path(trace_dir).resolve()
    shutil.rmtree(trace_dir, ignore_errors=True)  # an episode interrupted by a kill starts again
    session = None
    try:
        policy = policy if policy is not None else make_policy(policy_spec)
        session = open_session(case, track=track, trace_dir=trace_dir)
        result = policy.run(session, case, budget)
    except Exception as exc:  # a failing episode is recorded, never fatal to the batch
        result = EpisodeResult("", "error", 0, f"{type(exc).__name__}: {exc}")
    score = score_case(case, result.response)
    if session is not None:
        session.note(
            "score", {"task": score.task, "strict": score.strict, "loc": score.loc, "parse_error": score.parse_error}
        )
        session.close({"status": result.status, "response": result.response, "error": result.error})
    trace_dir.mkdir(parents=True, exist_ok=True)
    (trace_dir / "answer.txt").write_text(result.response, encoding="utf-8")
    return {
        "case_id": case.case_id,
        "module": case.module,
        "policy": policy_spec,
        "track": track,
        "status": result.status,
        "task": score.task,
        "strict": score.strict,
        "loc": score.loc,
        "parse_error": score.parse_error,
        "rounds": result.rounds,
        "response": result.response,
        "error": result.error,
        "trace_dir": str(trace_dir.relative_to(run_dir)),
        "duration_s": round(time.time() - t0, 3),
        "finished_at": time.time(),
    }


def policy_slug(spec: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in spec)


def _progress(n: int, total: int, row: dict[str, Any]) -> None:
    bar = "#" * int(30 * n / max(total, 1))
    print(
        f"\r[{bar:<30}] {n}/{total} {row['case_id']} {row['status']} strict={row['strict']:.2f}",
        end="\n" if n == total else "",
        file=sys.stderr,
        flush=True,
    )


def run_batch(
    cases_root: str | Path,
    policy: str,
    run_dir: str | Path,
    workers: int = 1,
    scheduler: str | Any | None = None,
    track: str = "A",
    budget: int = 20,
    progress: Callable[[int, int, dict[str, Any]], None] | None = _progress,
) -> list[dict[str, Any]]:
    """Run every not-yet-finished episode; returns all rows of this policy and track."""
    run_dir = Path(run_dir).resolve()
    db = ResultsDB(run_dir / "results.sqlite")
    try:
        finished = db.done(policy, track)
        todo = [str(c.root) for c in find_cases(cases_root) if c.case_id not in finished]
        args = [(case, policy, str(run_dir), track, budget) for case in todo]
        for n, row in enumerate(_execute(args, workers, scheduler), 1):
            db.insert(row)
            if progress:
                progress(n, len(args), row)
        rows = [r for r in db.rows() if r["policy"] == policy and r["track"] == track]
        from copilot.bench.report import write_report
        from copilot.medflow.registry import report_columns

        write_report(db.rows(), run_dir / "report.html", report_columns())
        return rows
    finally:
        db.close()


def _execute(args: list[tuple[Any, ...]], workers: int, scheduler: str | Any | None) -> Iterable[dict[str, Any]]:
    if not args:
        return
    if scheduler is not None:
        yield from _execute_dask(args, scheduler)
    elif workers <= 1:
        for a in args:
            yield run_episode(*a)
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run_episode, *a) for a in args]
            for fut in as_completed(futures):
                yield fut.result()


def _execute_dask(args: list[tuple[Any, ...]], scheduler: str | Any) -> Iterable[dict[str, Any]]:
    from dask.distributed import Client
    from dask.distributed import as_completed as dask_completed

    client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
    try:
        futures = [client.submit(run_episode, *a, pure=False) for a in args]
        for fut in dask_completed(futures):
            yield fut.result()
    finally:
        if client is not scheduler:
            client.close()
