"""Answering `/medcopilot/v1` requests from the route table, for every host.

`dispatch` is synchronous and host-neutral: it takes the method, the path below the prefix, the raw body and
the services the host offers (jobs only where a host runs them), and returns `(status, JSON object)`. What
comes before it — transport limits, Host/Origin checks, the token — stays with each host, since only the
uvicorn server sees headers.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from copilot.errors import HandlerError
from copilot.server.limits import DEFAULT_LIMITS, Limits, parse_json_body
from copilot.server.openapi import openapi_document
from copilot.server.routes import API, Route, error, find_route
from copilot.trace.paging import page_params, read_page
from copilot.trace.recorder import TRACE_FILE

STATE_WAIT_S = 1.0  # GET /state waits this long for a call in progress, then answers the last completed state


def dispatch(
    session: Any,
    method: str,
    path: str,
    body: bytes | None,
    *,
    jobs: Any = None,
    limits: Limits = DEFAULT_LIMITS,
    actor: str = "http",
    timeout: bool = True,
    query: str = "",
) -> tuple[int, Any]:
    """Answer one request on a session; `path` is below `API`, `query` its query string (paging `GET /trace`).
    Refusals are `(status, error envelope)`.

    `jobs` (a `JobManager`) serves `/jobs/*`; without it those paths are unknown. With `timeout`, a synchronous
    call still running after `limits.call_timeout_s` is cancelled at its next step and rolled back.
    """
    try:
        route, params = find_route(method, path, jobs is not None)
        return _answer(route, params, session, body, jobs, limits, actor, timeout, query)
    except HandlerError as exc:
        return exc.status, error(exc.code, exc.message)


def _answer(
    route: Route, params: dict[str, str], session: Any, body: bytes | None, jobs: Any, limits: Limits, actor: str,
    timeout: bool, query: str = "",
) -> tuple[int, Any]:  # fmt: skip
    op = route.operation
    if op == "list_handlers":
        return 200, {"handlers": session.handlers(), "track": session.track}
    if op == "get_state":
        return 200, {"ok": True, "state": session.snapshot(STATE_WAIT_S)}
    if op == "get_trace":  # a page at a time, read from the file: a long trace is never held whole
        after, limit = page_params(parse_qs(query))
        folder = getattr(session, "trace_dir", None)
        return 200, {"ok": True, **read_page(Path(folder) / TRACE_FILE if folder else None, after, limit)}
    if op == "get_openapi":
        return 200, openapi_document(session.handlers(), API)
    if op == "call":
        return _call(session, params["name"], parse_json_body(body, limits), limits, actor, timeout, jobs is not None)
    if op == "start_job":
        name = params["name"]
        if name not in session.registry:
            raise HandlerError("unknown_handler", f"no handler named {name!r}")
        args = parse_json_body(body, limits)
        started = jobs.submit(name, args if isinstance(args, dict) else {"_": args}, actor=actor)
        return 202, started.to_json()
    job = jobs.get(params["job_id"])
    if job is None:
        raise HandlerError("not_found", f"no job {params['job_id']!r}", status=404)
    if op == "get_job":
        return 200, job.to_json()
    return 202, jobs.cancel(params["job_id"]).to_json()


def _call(
    session: Any, name: str, args: Any, limits: Limits, actor: str, timeout: bool, has_jobs: bool
) -> tuple[int, Any]:
    """A synchronous call; one that outlives the limit is cancelled (nothing changes) and named as such."""
    limit = limits.call_timeout_s
    deadline = time.monotonic() + limit
    cancelled = (lambda: time.monotonic() > deadline) if timeout else None
    outcome = session.call(name, args, actor, None, cancelled)
    if timeout and not outcome.ok and (outcome.error or {}).get("code") == "cancelled" and time.monotonic() > deadline:
        hint = f" Run it as a job: POST {API}/jobs/{name}" if has_jobs else ""
        return 422, error("call_timeout", f"{name} ran longer than {limit:g} s, the limit of a synchronous call; "
                                          f"nothing changed.{hint}")  # fmt: skip
    return outcome.status, outcome.envelope()
