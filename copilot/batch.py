"""`medcopilot bench run`: episodes in parallel worker processes (or on a Dask cluster), resumable, with
results in SQLite and an HTML report.

Each episode writes its trace under `RUN_DIR/episodes/<policy>/<track>/b<budget>/r<repeat>/<case_id>/`;
its result row is inserted only once the episode has finished (done, budget exhausted or error), keyed
by (case, model, policy, track, operation set, budget, backend, seed, repeat). Killing a run loses at
most the episodes in flight; running it again skips every finished one, and running it with another
budget, seed or repeat count adds rows instead of reusing them. Each row keeps the parsed answer, each
field's correctness and each evidence check (`details`), and the process metrics of its trace
(`process`), so every table of the report is recomputed from `results.sqlite` alone.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from copilot.cases.pack import find_cases

SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    case_id TEXT NOT NULL, module TEXT NOT NULL, model TEXT NOT NULL, policy TEXT NOT NULL,
    track TEXT NOT NULL, ops TEXT NOT NULL, budget INTEGER NOT NULL, backend TEXT NOT NULL,
    seed INTEGER NOT NULL, repeat INTEGER NOT NULL,
    status TEXT NOT NULL, task REAL NOT NULL, strict REAL NOT NULL, loc REAL, parse_error TEXT,
    rounds INTEGER NOT NULL, response TEXT NOT NULL, error TEXT, trace_dir TEXT NOT NULL,
    duration_s REAL NOT NULL, finished_at REAL NOT NULL, details TEXT NOT NULL, process TEXT NOT NULL,
    PRIMARY KEY (case_id, model, policy, track, ops, budget, backend, seed, repeat)
)"""
KEY = ("model", "policy", "track", "ops", "budget", "backend", "seed", "repeat")
COLUMNS = (
    "case_id",
    "module",
    *KEY,
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
    "details",
    "process",
)
JSON_COLUMNS = ("details", "process")
DEFAULTS: dict[str, Any] = {"ops": "", "budget": 20, "backend": "embedded", "seed": 0, "repeat": 0}


class SchemaError(RuntimeError):
    """A results database written by another version of the schema."""


def model_name(policy: str) -> str:
    """The model a policy runs (`openai:gpt-x` → `gpt-x`); offline policies are their own model."""
    return policy.split(":", 1)[1] if policy.startswith("openai:") else policy


class ResultsDB:
    """One row per (case, model, policy, track, ops, budget, backend, seed, repeat); written by the coordinator."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path)
        self._check_version()
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        self.conn.execute(SCHEMA)
        self.conn.commit()

    def _check_version(self) -> None:
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "results" not in tables:
            return
        version = 1
        if "meta" in tables:
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 1
        if version != SCHEMA_VERSION:
            self.conn.close()
            raise SchemaError(
                f"{self.path} holds results schema {version}; this version writes schema {SCHEMA_VERSION} "
                "(per-case details, budget, seed and repeat in the key). Its rows cannot be extended or "
                "rescored in place: write into a new run folder (or move the old results.sqlite aside)."
            )

    def done(self, key: dict[str, Any]) -> set[str]:
        """Case ids finished under one full key (model, policy, track, ops, budget, backend, seed, repeat)."""
        where = " AND ".join(f"{k} = ?" for k in KEY)
        rows = self.conn.execute(f"SELECT case_id FROM results WHERE {where}", [key[k] for k in KEY])
        return {r[0] for r in rows}

    def insert(self, row: dict[str, Any]) -> None:
        full = {**DEFAULTS, "model": row.get("policy"), "details": {}, "process": {}, **row}
        values = [json.dumps(full[c]) if c in JSON_COLUMNS else full[c] for c in COLUMNS]
        self.conn.execute(
            f"INSERT OR REPLACE INTO results ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})",
            values,
        )
        self.conn.commit()

    def rows(self) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            f"SELECT {', '.join(COLUMNS)} FROM results ORDER BY model, policy, track, ops, budget, module, case_id, "
            "repeat"
        )
        out = []
        for r in cur:
            row = dict(zip(COLUMNS, r, strict=True))
            for c in JSON_COLUMNS:
                row[c] = json.loads(row[c])
            out.append(row)
        return out

    def close(self) -> None:
        self.conn.close()


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a results database (refused with a clear message when its schema is another version)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no results database at {path}")
    db = ResultsDB(path)
    try:
        return db.rows()
    finally:
        db.close()


def episode_dir(run_dir: str | Path, policy: str, track: str, ops: str, budget: int, repeat: int, case_id: str) -> Path:
    """The episode's trace folder, confined to the run folder (a case id is never a path)."""
    track_part = f"{track}-{ops}" if ops else track
    return confined(Path(run_dir), "episodes", policy_slug(policy), track_part, f"b{budget}", f"r{repeat}", case_id)


def run_episode(
    case_dir: str,
    policy_spec: str,
    run_dir: str,
    track: str = "A",
    budget: int = 20,
    trace_dir: str | Path | None = None,
    policy: Any = None,
    key: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One episode end to end (in a worker): session with trace, policy, score; returns the result row."""
    from copilot.agent.policy import EpisodeResult
    from copilot.agent.prompts import task_prompt
    from copilot.bench.process import episode_metrics, evidence_provenance
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
        trace_dir = episode_dir(run_dir, policy_spec, track, key["ops"], budget, key["repeat"], case.case_id)
    trace_dir = Path(trace_dir).resolve()
    clear_trace_dir(trace_dir)  # an episode interrupted by a kill starts again
    session = None
    try:
        policy = policy if policy is not None else make_policy(policy_spec)
        session = open_session(case, track=track, trace_dir=trace_dir, ops=key["ops"] or None, backend=key["backend"])
        prompt = task_prompt(case, budget)
        session.note("task_prompt", {"system": prompt.system, "user": prompt.user})  # what the task asked, for audit
        result = policy.run(session, case, budget)
    except Exception as exc:  # a failing episode is recorded, never fatal to the batch
        result = EpisodeResult("", "error", 0, f"{type(exc).__name__}: {exc}")
    provenance = None
    if session is not None and session.trace_dir is not None:
        provenance = evidence_provenance(session.trace_events(), result.response)
    score = score_case(case, result.response, provenance)
    if session is not None:
        session.note(
            "score", {"task": score.task, "strict": score.strict, "loc": score.loc, "parse_error": score.parse_error}
        )
        session.close({"status": result.status, "response": result.response, "error": result.error})
    trace_dir.mkdir(parents=True, exist_ok=True)
    (trace_dir / "answer.txt").write_text(result.response, encoding="utf-8")
    process = episode_metrics(read_events(trace_dir)[0], case, score, budget) if session is not None else {}
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
        "trace_dir": _relative(trace_dir, Path(run_dir)),
        "duration_s": round(time.time() - t0, 3),
        "finished_at": time.time(),
        "details": score.details,
        "process": process,
    }
    from copilot.bench.episode_page import write_episode_page

    write_episode_page(run_dir, row)
    return row


def _relative(path: Path, root: Path) -> str:
    """`path` relative to the run folder (as stored in the row), or absolute when it lies elsewhere."""
    try:
        return str(path.relative_to(root.resolve()))
    except ValueError:
        return str(path)


TRACE_ENTRIES = {"trace.jsonl", "artifacts", "derived", "answer.txt"}


def confined(root: Path, *parts: str) -> Path:
    """`root/parts...`, refused (ValueError) unless each part is one plain name and the result, links
    followed, stays inside `root`: nothing outside a run folder is ever written or deleted."""
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\\" in part or "\x00" in part:
            raise ValueError(f"{part!r} is not a plain folder name")
    base = root.resolve()
    path = base.joinpath(*parts)
    if base != path.resolve() and base not in path.resolve().parents:
        raise ValueError(f"{path} leads outside {base}")
    return path


def clear_trace_dir(path: Path) -> None:
    """Remove an earlier (interrupted) trace folder; refuse a link or a folder that holds anything else."""
    if path.is_symlink():
        raise ValueError(f"{path} is a symbolic link; not removing it")
    if not path.exists():
        return
    if not path.is_dir():
        raise ValueError(f"{path} exists and is not a trace folder")
    others = sorted(p.name for p in path.iterdir() if p.name not in TRACE_ENTRIES)
    if others:
        raise ValueError(f"{path} holds files that are not a trace ({', '.join(others[:3])}); not removing it")
    shutil.rmtree(path)


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
    repeats: int = 1,
    model: str | None = None,
    seed: int = 0,
    backend: str = "embedded",
    ops: str | None = None,
) -> list[dict[str, Any]]:
    """Run every not-yet-finished episode (cases × repeats); returns all rows of this configuration."""
    run_dir = Path(run_dir).resolve()
    db = ResultsDB(run_dir / "results.sqlite")
    ops = ops if ops is not None else ("all" if track == "B" else "")
    base = {"model": model or model_name(policy), "policy": policy, "track": track, "budget": budget,
            "backend": backend, "seed": seed, "ops": ops}  # fmt: skip
    try:
        problems: list[str] = []
        cases = find_cases(cases_root, problems)
        for problem in problems:  # a bad case pack is reported and skipped; the others run
            print(f"skipped: {problem}", file=sys.stderr)
        args = []
        for repeat in range(repeats):
            key = {**base, "repeat": repeat}
            finished = db.done(key)
            args += [(str(c.root), policy, str(run_dir), track, budget, None, None, key)
                     for c in cases if c.case_id not in finished]  # fmt: skip
        for n, row in enumerate(_execute(args, workers, scheduler), 1):
            db.insert(row)
            if progress:
                progress(n, len(args), row)
        rows = [r for r in db.rows() if all(r[k] == v for k, v in base.items())]
        from copilot.bench.report import write_report
        from copilot.medflow.registry import report_columns

        write_report(db.rows(), run_dir / "report.html", report_columns(), run_dir=run_dir)
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
