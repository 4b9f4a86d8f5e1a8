"""Run folders of the benchmark: the results database (one row per episode key), episode folders (confined to
the run folder, marked as the project's own), the lock that serialises two runs on one folder, error rows and
the check that refuses a policy that cannot run. Used by `bench run` (`copilot.medflow.bench_run`), `bench score` and
`bench trackc`."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from copilot.privatefs import make_private, open_private, private_dir

SCHEMA_VERSION = 5
SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    case_id TEXT NOT NULL, module TEXT NOT NULL, model TEXT NOT NULL, policy TEXT NOT NULL,
    track TEXT NOT NULL, ops TEXT NOT NULL, protocol TEXT NOT NULL, budget INTEGER NOT NULL,
    backend TEXT NOT NULL, seed INTEGER NOT NULL, repeat INTEGER NOT NULL, rules TEXT NOT NULL,
    config TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, task REAL NOT NULL, strict REAL NOT NULL, loc REAL,
    parse_error TEXT,
    rounds INTEGER NOT NULL, response TEXT NOT NULL, error TEXT, trace_dir TEXT NOT NULL,
    duration_s REAL NOT NULL, finished_at REAL NOT NULL, details TEXT NOT NULL, process TEXT NOT NULL,
    PRIMARY KEY (case_id, model, policy, track, ops, protocol, budget, backend, seed, repeat, rules, config)
)"""
# config: the model configuration a model policy ran under (profile and version, wire, sampling, reasoning, tool
# protocol, images per request), so runs that differ in any of it never pool; "" for offline policies
KEY = ("model", "policy", "track", "ops", "protocol", "budget", "backend", "seed", "repeat", "rules", "config")
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
    "ops": "", "protocol": "harness", "budget": 20, "backend": "embedded", "seed": 0, "repeat": 0, "rules": "",
    "config": "",
}  # fmt: skip


class RunRefused(ValueError):
    """A run that cannot be scored (unknown policy, model service not configured or not reachable)."""


class SchemaError(RuntimeError):
    """A results database written by another version of the schema."""


def model_name(policy: str) -> str:
    """The model a policy runs (`openai:gpt-x` → `gpt-x`); offline policies are their own model."""
    from copilot.llm.spec import model_of

    return model_of(policy)


class ResultsDB:
    """One row per (case, model, policy, track, ops, protocol, budget, backend, seed, repeat, rules); written by
    the coordinator."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        private_dir(self.path.parent.resolve())  # answers and scores of patient studies: owner-only, as sessions are
        if not self.path.exists():
            open_private(self.path.resolve(), "ab").close()  # SQLite gives its -wal and -shm files the database's mode
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
        if version in (2, 3, 4):  # older rows: the product surface (2), the paper's reading of every rule (2, 3),
            # no model configuration recorded (2-4)
            self._migrate(version)
            return
        if version != SCHEMA_VERSION:
            self.conn.close()
            raise SchemaError(
                f"{self.path} holds results schema {version}; this version writes schema {SCHEMA_VERSION} "
                "(per-case details; budget, seed, repeat, protocol and rules in the key). Its rows cannot be extended "
                "or rescored in place: write into a new run folder (or move the old results.sqlite aside)."
            )

    def _migrate(self, version: int) -> None:
        """Schema 2, 3 or 4 → 5: the protocol (2), the rules (2, 3) and the model configuration (2-4) join the key;
        earlier rows are `harness` runs (2) under the paper's reading of every rule (rules ""), configuration ""."""
        fill = {"config": "''"}
        if version < 4:
            fill["rules"] = "''"
        if version == 2:
            fill["protocol"] = "'harness'"
        with self.conn:
            self.conn.execute("ALTER TABLE results RENAME TO results_old")
            self.conn.execute(SCHEMA)
            old = [c for c in COLUMNS if c not in fill]
            self.conn.execute(
                f"INSERT INTO results ({', '.join([*old, *fill])}) "
                f"SELECT {', '.join([*old, *fill.values()])} FROM results_old"
            )
            self.conn.execute("DROP TABLE results_old")
            self.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

    def done(self, key: dict[str, Any]) -> set[str]:
        """Case ids finished (not errored) under one full key (model, policy, track, ops, protocol, budget,
        backend, seed, repeat, rules); an errored episode is run again."""
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
    seed, backend and rules name a level only when they differ from the defaults, so every key has its own
    folder."""
    key = {**DEFAULTS, "model": model_name(policy), **(key or {})}
    policy_part = policy_slug(policy) + (f"~{policy_slug(key['model'])}" if key["model"] != model_name(policy) else "")
    track_part = (f"{track}-{ops}" if ops else track) + ("-paper" if key["protocol"] == "paper" else "")
    budget_part = f"b{budget}" + (f"-s{key['seed']}" if key["seed"] else "")
    budget_part += f"-{policy_slug(key['backend'])}" if key["backend"] != "embedded" else ""
    budget_part += f"-{policy_slug(key['rules'])}" if key["rules"] else ""
    budget_part += f"-m{hashlib.sha256(key['config'].encode()).hexdigest()[:8]}" if key.get("config") else ""
    return confined(Path(run_dir), "episodes", policy_part, track_part, budget_part, f"r{repeat}", case_id)


def error_row(case_dir: str, key: dict[str, Any], message: str) -> dict[str, Any]:
    """The row of an episode that failed before it could be scored (kept out of every mean)."""
    case_id, module = Path(case_dir).name, "unknown"
    with contextlib.suppress(Exception):
        meta = json.loads((Path(case_dir) / "case.json").read_text(encoding="utf-8"))
        case_id, module = str(meta["case_id"]), str(meta["module"])
    return {"case_id": case_id, "module": module, **key, "status": "error", "task": 0.0, "strict": 0.0,
            "loc": None, "parse_error": None, "rounds": 0, "response": "", "error": message, "trace_dir": "",
            "duration_s": 0.0, "finished_at": time.time(), "details": {}, "process": {}}  # fmt: skip


def relative_to_run(path: Path, root: Path) -> str:
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


def check_policy(policy: str, base_url: str | None = None, timeout_s: float = 5.0) -> None:
    """Refuse (RunRefused, one line) a policy that cannot run: an unknown spec, an unreadable script, or a model
    policy without a configured, reachable service or with a key the service rejects. No prompt is sent."""
    from copilot.llm.spec import SpecError, is_model_policy, parse_policy, service_problem
    from copilot.medflow.policies import make_policy

    if is_model_policy(policy):
        try:
            spec = parse_policy(policy, base_url=base_url)
        except SpecError as exc:
            raise RunRefused(f"policy {policy}: {exc}") from None
        problem = service_problem(spec)
        if problem:
            raise RunRefused(f"policy {policy}: {problem}")
        _reachable(spec, timeout_s)
        return
    try:
        make_policy(policy)
    except (ValueError, OSError) as exc:
        raise RunRefused(f"policy {policy}: {' '.join(str(exc).split())}") from None


def _reachable(spec: Any, timeout_s: float) -> None:
    """The service answers a TCP connection, and its model listing does not reject the key."""
    import socket
    from urllib.parse import urlsplit

    from copilot.llm.connect import connect
    from copilot.llm.providers import PROVIDERS
    from copilot.llm.types import ModelError
    from copilot.trace.redact import redact_text

    url = spec.base_url or PROVIDERS[spec.provider].default_base_url or ""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise RunRefused(f"model service {redact_text(url)} is not reachable ({exc.strerror or exc})") from None
    try:
        connect(spec, timeout_s)[1].list_models()
    except ModelError as exc:
        if exc.kind == "auth":
            keys = " or ".join(PROVIDERS[spec.provider].key_env)
            raise RunRefused(f"model service {redact_text(url)} refused the credentials (HTTP {exc.status}); "
                             f"check {keys}") from None  # fmt: skip
    except Exception:  # a service without a model listing: its first request is the real test
        return


@contextlib.contextmanager
def run_lock(run_dir: Path, wait: bool = True, notice: Callable[[str], None] | None = None) -> Any:
    """Hold `RUN_DIR/.lock` (an advisory lock the kernel drops when its holder dies, even by SIGKILL): a second
    run on the same folder waits for the first (or, without `wait`, is refused). The run folder is owner-only (0700,
    an older one narrowed), and what the run wrote in it is narrowed to 0600 when it ends."""
    private_dir(Path(run_dir).resolve())  # a run folder named through a link is the user's choice
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
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
        with contextlib.suppress(OSError):  # galleries, montages, pages and the report: patient-derived
            make_private(run_dir)
        os.close(fd)
