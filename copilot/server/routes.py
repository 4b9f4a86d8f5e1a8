"""The `/medcopilot/v1` route table, declared once: dispatched by `copilot.server.dispatch` (for the uvicorn
application and Slicer's WebServer handler alike) and read by the OpenAPI document."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from copilot.errors import HandlerError, MethodNotAllowed

API = "/medcopilot/v1"


@dataclass(frozen=True)
class Route:
    """One route: method, path template below `API` (`{name}` = one path segment), OpenAPI operation."""

    method: str
    path: str
    operation: str
    summary: str
    ok_status: int = 200
    per_handler: bool = False  # the OpenAPI document lists it once per handler, with its arguments as the body

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """The path template compiled once (`{name}` → one path segment)."""
        return re.compile("^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path)) + "$")

    def match(self, path: str) -> dict[str, str] | None:
        m = self.pattern.match(path)
        return m.groupdict() if m else None


ROUTES: tuple[Route, ...] = (
    Route("GET", "/handlers", "list_handlers", "the handlers of this session's track with their argument schemas"),
    Route("POST", "/handlers/{name}", "call", "call a handler; a refused call changes nothing", per_handler=True),
    Route("GET", "/state", "get_state", "the viewer state and the evidence recorded so far"),
    Route("GET", "/trace", "get_trace", "the trace events recorded so far, a page at a time (?after=SEQ&limit=N)"),
    Route("GET", "/openapi.json", "get_openapi", "this document"),
    Route("POST", "/jobs/{name}", "start_job", "a handler call as a job (poll GET /jobs/JOB_ID)", 202, True),
    Route("GET", "/jobs/{job_id}", "get_job", "a job's progress and, once done, its outcome"),
    Route("DELETE", "/jobs/{job_id}", "cancel_job", "cancel a job (rolled back: nothing changes)", 202),
)


def error(code: str, message: str) -> dict[str, Any]:
    """The refusal envelope every route and host uses."""
    return {"ok": False, "error": {"code": code, "message": message}}


def find_route(method: str, path: str, jobs: bool = True) -> tuple[Route, dict[str, str]]:
    """The route of a request; 404 for an unknown path, 405 for a known path with another method."""
    allowed: list[str] = []
    for route in ROUTES:
        params = route.match(path)
        if params is None or (route.path.startswith("/jobs") and not jobs):
            continue
        allowed.append(route.method)
        if route.method == method:
            return route, params
    if allowed:
        raise MethodNotAllowed(f"{API}{path} takes {', '.join(sorted(set(allowed)))}, not {method}",
                               tuple(sorted(set(allowed))))  # fmt: skip
    raise HandlerError("not_found", f"no route {method} {API}{path}", status=404)


