"""Handler calls run off the request thread: a job per call, with progress and cancellation.

A job runs `Session.call` in a worker thread (so it is validated, serialised with other calls, rolled
back on failure and traced like any call); operators report progress through their context and check
for cancellation at their steps. A cancelled job ends with the `cancelled` error and changes nothing.
At most `max_active` jobs are queued or running (more are refused with `too_many_jobs`), and only the
last `kept` finished jobs are kept for polling, so neither threads nor the job list grow without bound.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from copilot.errors import HandlerError
from copilot.session import Session
from copilot.trace.outcome import CallOutcome

FINAL = ("done", "failed", "cancelled")


@dataclass
class Job:
    id: str
    handler: str
    args: dict[str, Any]
    status: str = "queued"  # queued | running | done | failed | cancelled
    progress: float = 0.0
    message: str = ""
    outcome: CallOutcome | None = None
    created: float = field(default_factory=time.time)
    cancel_event: threading.Event = field(default_factory=threading.Event)
    done_event: threading.Event = field(default_factory=threading.Event)

    def report(self, fraction: float, message: str = "") -> None:
        self.progress = max(self.progress, min(1.0, float(fraction)))
        self.message = message

    def to_json(self, with_images: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "job_id": self.id,
            "handler": self.handler,
            "status": self.status,
            "progress": round(self.progress, 4),
            "message": self.message,
        }
        if self.outcome is not None:
            out["response"] = self.outcome.envelope(with_images)
        return out


class JobManager:
    """Jobs of one session."""

    def __init__(self, session: Session, max_active: int = 4, kept: int = 64) -> None:
        self.session = session
        self.jobs: dict[str, Job] = {}
        self.max_active, self.kept = max_active, kept
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def active(self) -> int:
        """Jobs queued or running."""
        return sum(1 for j in list(self.jobs.values()) if j.status not in FINAL)

    def submit(self, handler: str, args: dict[str, Any], actor: str = "job") -> Job:
        """Start a job, or refuse (`too_many_jobs`, 429) while `max_active` are unfinished."""
        with self._lock:
            if self.active() >= self.max_active:
                raise HandlerError(
                    "too_many_jobs", f"{self.max_active} jobs are already queued or running; retry later", status=429
                )
            finished = [j for j in self.jobs.values() if j.status in FINAL]
            for old in finished[: max(0, len(finished) - self.kept + 1)]:
                del self.jobs[old.id]
            job = Job(f"job-{next(self._ids)}", handler, dict(args))
            self.jobs[job.id] = job
        threading.Thread(target=self._run, args=(job, actor), daemon=True, name=job.id).start()
        return job

    def _run(self, job: Job, actor: str) -> None:
        job.status = "running"
        outcome = self.session.call(
            job.handler, job.args, actor=actor, progress=job.report, cancelled=job.cancel_event.is_set
        )
        job.outcome = outcome
        if outcome.ok:
            job.status, job.progress = "done", 1.0
        elif outcome.error and outcome.error.get("code") == "cancelled":
            job.status = "cancelled"
        else:
            job.status = "failed"
        job.done_event.set()

    def get(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)

    def cancel(self, job_id: str) -> Job | None:
        job = self.jobs.get(job_id)
        if job is not None and job.status not in FINAL:
            job.cancel_event.set()
        return job
