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
import fcntl
import json
import os
import shutil
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.cases.pack import find_cases

SCHEMA_VERSION = 3
SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    case_id TEXT NOT NULL, module TEXT NOT NULL, model TEXT NOT NULL, policy TEXT NOT NULL,
    track TEXT NOT NULL, ops TEXT NOT NULL, protocol TEXT NOT NULL, budget INTEGER NOT NULL,
    backend TEXT NOT NULL, seed INTEGER NOT NULL, repeat INTEGER NOT NULL,
    status TEXT NOT NULL, task REAL NOT NULL, strict REAL NOT NULL, loc REAL, parse_error TEXT,
    rounds INTEGER NOT NULL, response TEXT NOT NULL, error TEXT, trace_dir TEXT NOT NULL,
    duration_s REAL NOT NULL, finished_at REAL NOT NULL, details TEXT NOT NULL, process TEXT NOT NULL,
    PRIMARY KEY (case_id, model, policy, track, ops, protocol, budget, backend, seed, repeat)
)"""
KEY = ("model", "policy", "track", "ops", "protocol", "budget", "backend", "seed", "repeat")
PROTOCOLS = ("harness", "paper")
MARKER = ".medcopilot-episode"  # written first into every episode folder: the folder is the project's own
LOCK = ".lock"
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
DEFAULTS: dict[str, Any] = {
    "ops": "", "protocol": "harness", "budget": 20, "backend": "embedded", "seed": 0, "repeat": 0,
}  # fmt: skip


class RunRefused(ValueError):
    """A run that cannot be scored (unknown policy, model service not configured or not reachable)."""


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
        if version == 2:  # rows from before the protocol column: all were run on the product surface
            self._migrate_v2()
            return
        if version != SCHEMA_VERSION:
            self.conn.close()
            raise SchemaError(
                f"{self.path} holds results schema {version}; this version writes schema {SCHEMA_VERSION} "
                "(per-case details, budget, seed and repeat in the key). Its rows cannot be extended or "
                "rescored in place: write into a new run folder (or move the old results.sqlite aside)."
            )

    def _migrate_v2(self) -> None:
        """Schema 2 → 3: the protocol joins the key; earlier rows are `harness` runs."""
        with self.conn:
            self.conn.execute("ALTER TABLE results RENAME TO results_v2")
            self.conn.execute(SCHEMA)
            old = [c for c in COLUMNS if c != "protocol"]
            self.conn.execute(
                f"INSERT INTO results ({', '.join(old)}, protocol) SELECT {', '.join(old)}, 'harness' FROM results_v2"
            )
            self.conn.execute("DROP TABLE results_v2")
            self.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

    def done(self, key: dict[str, Any]) -> set[str]:
        """Case ids finished (not errored) under one full key (model, policy, track, ops, protocol, budget,
        backend, seed, repeat); an errored episode is run again."""
        where = " AND ".join(f"{k} = ?" for k in KEY)
        key = {**DEFAULTS, **key}
        rows = self.conn.execute(
            f"SELECT case_id FROM results WHERE {where} AND status != 'error'", [key[k] for k in KEY]
        )
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
            f"SELECT {', '.join(COLUMNS)} FROM results ORDER BY model, policy, track, ops, protocol, budget, module, "
            "case_id, repeat"
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


def episode_dir(
    run_dir: str | Path, policy: str, track: str, ops: str, budget: int, repeat: int, case_id: str,
    key: dict[str, Any] | None = None,
) -> Path:  # fmt: skip
    """The episode's trace folder, confined to the run folder (a case id is never a path); model, protocol,
    seed and backend name a level only when they differ from the defaults, so every key has its own folder."""
    key = {**DEFAULTS, "model": model_name(policy), **(key or {})}
    policy_part = policy_slug(policy) + (f"~{policy_slug(key['model'])}" if key["model"] != model_name(policy) else "")
    track_part = (f"{track}-{ops}" if ops else track) + ("-paper" if key["protocol"] == "paper" else "")
    budget_part = f"b{budget}" + (f"-s{key['seed']}" if key["seed"] else "")
    budget_part += f"-{policy_slug(key['backend'])}" if key["backend"] != "embedded" else ""
    return confined(Path(run_dir), "episodes", policy_part, track_part, budget_part, f"r{repeat}", case_id)


class CallBudget:
    """The session as a policy sees it, with at most `budget` agent handler calls (the paper's "maximum
    number of explicit operation calls", Table 7): a call past the budget is refused (`budget_exhausted`,
    noted in the trace) without reaching the viewer, whatever the number of calls per round."""

    def __init__(self, session: Any, budget: int, protocol: str = "harness") -> None:
        self._session, self._budget, self.used = session, budget, 0
        self.protocol = protocol  # the prompts a model-driven policy uses (`agent.prompts.template`)

    def call(self, name: str, args: dict[str, Any] | None = None, actor: str = "agent", **kw: Any) -> Any:
        if actor == "agent":
            if self.used >= self._budget:
                from copilot.trace.outcome import CallOutcome

                message = f"the budget of {self._budget} operation calls is spent; give the final answer now"
                self._session.note("call_refused", {"handler": name, "code": "budget_exhausted", "used": self.used})
                return CallOutcome(name, False, 429, error={"code": "budget_exhausted", "message": message})
            self.used += 1
        return self._session.call(name, args, actor=actor, **kw)

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
        trace_dir = episode_dir(run_dir, policy_spec, track, key["ops"], budget, key["repeat"], case.case_id, key)
    trace_dir = Path(trace_dir).resolve()
    clear_trace_dir(trace_dir)  # an episode interrupted by a kill starts again
    trace_dir.mkdir(parents=True, exist_ok=True)
    (trace_dir / MARKER).write_text(json.dumps({k: key[k] for k in KEY}), encoding="utf-8")
    session = None
    try:
        policy = policy if policy is not None else make_policy(policy_spec)
        session = open_session(case, track=track, trace_dir=trace_dir, ops=key["ops"] or None, backend=key["backend"],
                               protocol=key["protocol"])  # fmt: skip
        prompt = task_prompt(case, budget, key["protocol"])
        session.note("task_prompt", {"system": prompt.system, "user": prompt.user})  # what the task asked, for audit
        result = policy.run(CallBudget(session, budget, key["protocol"]), case, budget)
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


def error_row(case_dir: str, key: dict[str, Any], message: str) -> dict[str, Any]:
    """The row of an episode that failed before it could be scored (kept out of every mean)."""
    case_id, module = Path(case_dir).name, "unknown"
    with contextlib.suppress(Exception):
        meta = json.loads((Path(case_dir) / "case.json").read_text(encoding="utf-8"))
        case_id, module = str(meta["case_id"]), str(meta["module"])
    return {"case_id": case_id, "module": module, **key, "status": "error", "task": 0.0, "strict": 0.0,
            "loc": None, "parse_error": None, "rounds": 0, "response": "", "error": message, "trace_dir": "",
            "duration_s": 0.0, "finished_at": time.time(), "details": {}, "process": {}}  # fmt: skip


def _relative(path: Path, root: Path) -> str:
    """`path` relative to the run folder (as stored in the row), or absolute when it lies elsewhere."""
    try:
        return str(path.relative_to(root.resolve()))
    except ValueError:
        return str(path)


TRACE_ENTRIES = {"trace.jsonl", "artifacts", "derived", "answer.txt", "episode.html", MARKER}


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
    """Remove an earlier (interrupted) episode folder: one holding the project's marker, or only trace
    entries; refuse a link or a folder that holds anything else."""
    if path.is_symlink():
        raise ValueError(f"{path} is a symbolic link; not removing it")
    if not path.exists():
        return
    if not path.is_dir():
        raise ValueError(f"{path} exists and is not a trace folder")
    if (path / MARKER).is_file() and not (path / MARKER).is_symlink():
        shutil.rmtree(path)
        return
    others = sorted(p.name for p in path.iterdir() if p.name not in TRACE_ENTRIES)
    if others:
        raise ValueError(f"{path} holds files that are not a trace ({', '.join(others[:3])}); not removing it")
    shutil.rmtree(path)


def policy_slug(spec: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in spec)


def _progress(n: int, total: int, row: dict[str, Any]) -> None:
    bar = "#" * int(30 * n / max(total, 1))
    state = row["status"] if row["status"] == "error" else f"{row['status']} strict={row['strict']:.2f}"
    print(f"\r[{bar:<30}] {n}/{total} {row['case_id']} {state}", end="\n" if n == total else "", file=sys.stderr,
          flush=True)  # fmt: skip


def check_policy(policy: str, base_url: str | None = None, timeout_s: float = 5.0) -> None:
    """Refuse (RunRefused, one line) a policy that cannot run: an unknown spec, an unreadable script, or an
    `openai` policy without a configured, reachable model service. Nothing is sent to the service."""
    from copilot.medflow.policies import make_policy

    if policy == "openai" or policy.startswith("openai:"):
        url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise RunRefused(
                f"policy {policy}: no model service configured; set OPENAI_BASE_URL (an OpenAI-compatible "
                "endpoint; OPENAI_API_KEY for its key) or pass --base-url"
            )
        _reachable(url, timeout_s)
        return
    try:
        make_policy(policy)
    except (ValueError, OSError) as exc:
        raise RunRefused(f"policy {policy}: {' '.join(str(exc).split())}") from None


def _reachable(url: str, timeout_s: float) -> None:
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RunRefused(f"model service {url!r} is not an http(s) URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise RunRefused(f"model service {url} is not reachable ({exc.strerror or exc})") from None


@contextlib.contextmanager
def run_lock(run_dir: Path, wait: bool = True, notice: Callable[[str], None] | None = None) -> Any:
    """Hold `RUN_DIR/.lock` (an advisory lock the kernel drops when its holder dies, even by SIGKILL): a second
    run on the same folder waits for the first (or, without `wait`, is refused)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            if not wait:
                raise RunRefused(f"{run_dir} is in use by another run (pid {holder})") from None
            if notice:
                notice(f"waiting for the run holding {run_dir / LOCK} (pid {holder})")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


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
) -> list[dict[str, Any]]:
    """Run every not-yet-finished episode (cases × repeats); returns all rows of this configuration.

    The policy is checked first (RunRefused); `outcome`, when given, is filled with the counts."""
    if protocol not in PROTOCOLS:
        raise RunRefused(f"unknown protocol {protocol!r}; one of {', '.join(PROTOCOLS)}")
    check_policy(policy, base_url)
    run_dir = Path(run_dir).resolve()
    outcome = outcome if outcome is not None else BatchOutcome([])
    notice = (lambda m: print(m, file=sys.stderr, flush=True)) if progress else None
    with run_lock(run_dir, notice=notice):
        db = ResultsDB(run_dir / "results.sqlite")
        ops = ops if ops is not None else ("all" if track == "B" else "")
        base = {"model": model or model_name(policy), "policy": policy, "track": track, "budget": budget,
                "backend": backend, "seed": seed, "ops": ops, "protocol": protocol}  # fmt: skip
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
                args += [(str(c.root), policy, str(run_dir), track, budget, None, None, key)
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
            from copilot.bench.report import write_report
            from copilot.medflow.registry import report_columns

            write_report(db.rows(), run_dir / "report.html", report_columns(), run_dir=run_dir)
            outcome.rows = rows
            return rows
        finally:
            db.close()


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
