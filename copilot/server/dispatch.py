"""Answering `/medcopilot/v1` requests from the route table, for every host.

`dispatch` is synchronous and host-neutral: it takes the method, the path below the prefix, the raw body and
the services the host offers (jobs only where a host runs them), and returns `(status, JSON object)`. What
comes before it — transport limits, Host/Origin checks, the token — stays with each host, since only the
uvicorn server sees headers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from copilot.errors import HandlerError, MethodNotAllowed
from copilot.server.limits import DEFAULT_LIMITS, Limits, parse_json_body
from copilot.server.openapi import openapi_document
from copilot.server.routes import API, ROUTES, error, find_route
from copilot.tools.study_text import for_the_agent
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
        request = Request(params, session, body, jobs, limits, actor, timeout, query)
        return ANSWERS[route.operation](request)
    except MethodNotAllowed as exc:  # the methods the path takes travel with the refusal (the Allow header)
        refusal = error(exc.code, exc.message)
        refusal["error"]["allow"] = list(exc.allow)
        return exc.status, refusal
    except HandlerError as exc:  # a refusal names no UID and no path of this machine (the agent reads it)
        return exc.status, error(exc.code, str(for_the_agent(exc.message)))


@dataclass(frozen=True)
class Request:
    """One matched request and the services the host offers for it."""

    params: dict[str, str]
    session: Any
    body: bytes | None
    jobs: Any
    limits: Limits
    actor: str
    timeout: bool
    query: str


def _list_handlers(r: Request) -> tuple[int, Any]:
    return 200, {"handlers": r.session.handlers(), "track": r.session.track}


def _get_state(r: Request) -> tuple[int, Any]:
    return 200, {"ok": True, "state": r.session.snapshot(STATE_WAIT_S)}


def _get_trace(r: Request) -> tuple[int, Any]:
    """A page at a time, read from the file: a long trace is never held whole."""
    after, limit = page_params(parse_qs(r.query))
    folder = getattr(r.session, "trace_dir", None)
    return 200, {"ok": True, **read_page(Path(folder) / TRACE_FILE if folder else None, after, limit)}


def _get_openapi(r: Request) -> tuple[int, Any]:
    return 200, openapi_document(r.session.handlers(), API)


def _call_route(r: Request) -> tuple[int, Any]:
    args = parse_json_body(r.body, r.limits)
    return _call(r.session, r.params["name"], args, r.limits, r.actor, r.timeout, r.jobs is not None)


def _start_job(r: Request) -> tuple[int, Any]:
    name = r.params["name"]
    if name not in r.session.registry:
        raise HandlerError("unknown_handler", f"no handler named {name!r}")
    args = parse_json_body(r.body, r.limits)
    return 202, r.jobs.submit(name, args if isinstance(args, dict) else {"_": args}, actor=r.actor).to_json()


def _job(r: Request) -> Any:
    job = r.jobs.get(r.params["job_id"])
    if job is None:
        raise HandlerError("not_found", f"no job {r.params['job_id']!r}", status=404)
    return job


def _get_job(r: Request) -> tuple[int, Any]:
    return 200, _job(r).to_json()


def _cancel_job(r: Request) -> tuple[int, Any]:
    _job(r)
    return 202, r.jobs.cancel(r.params["job_id"]).to_json()


ANSWERS: dict[str, Callable[[Request], tuple[int, Any]]] = {  # each route's operation, bound once
    "list_handlers": _list_handlers, "get_state": _get_state, "get_trace": _get_trace, "get_openapi": _get_openapi,
    "call": _call_route, "start_job": _start_job, "get_job": _get_job, "cancel_job": _cancel_job,
}  # fmt: skip
if set(ANSWERS) != {r.operation for r in ROUTES}:  # a route without an answer is a defect found at import
    raise RuntimeError("the route table and its answers differ")


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
    envelope = outcome.envelope()
    if not outcome.ok:  # a refusal names no UID and no path of this machine (the agent reads it)
        envelope = for_the_agent(envelope)
    return outcome.status, envelope
