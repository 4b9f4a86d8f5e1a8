"""How much a PACS may send and how long it may take: byte limits per answer and per instance, JSON nesting
and item bounds, and overall deadlines per command and per retrieval (each overrun a named `pacs_*` refusal).

Environment (read when a client is made): `MEDCOPILOT_PACS_DEADLINE_S` (a search or listing, default 120),
`MEDCOPILOT_PACS_RETRIEVAL_S` (retrieving a series or a study, default 1800), `MEDCOPILOT_PACS_READ_S` (one
silent wait on the connection, default 30), `MEDCOPILOT_PACS_MAX_JSON_MB` (a search answer, default 32),
`MEDCOPILOT_PACS_MAX_PART_MB` (one retrieved instance, default 2048), `MEDCOPILOT_PACS_WORKERS` (1, the
default: each series in one streamed answer; 2 to 16: instance by instance, that many requests at once),
`MEDCOPILOT_PACS_REDIRECTS` (`same-origin`, the default, or `none`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from copilot.pacs.errors import PacsError

MIB = 1024 * 1024
MAX_WORKERS = 16


def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(frozen=True)
class PacsLimits:
    """The bounds one client applies to everything a PACS sends."""

    command_s: float = 120.0
    retrieval_s: float = 1800.0
    read_s: float = 30.0
    json_bytes: int = 32 * MIB  # one search or listing answer, as decompressed
    json_item_bytes: int = 1 * MIB  # one study or series entry
    json_depth: int = 24  # DICOM JSON of a study entry nests 4 deep; sequences a few more
    max_series: int = 5000  # series listed for one study
    max_instances: int = 50_000  # instances listed for one series
    workers: int = 1  # requests in flight at once (1: a series in one streamed answer)
    part_bytes: int = 2048 * MIB  # one instance, as decompressed
    part_header_bytes: int = 16 * 1024
    redirects: str = "same-origin"

    @classmethod
    def from_env(cls) -> PacsLimits:
        """The defaults, overridden by the environment."""
        base = cls()
        policy = os.environ.get("MEDCOPILOT_PACS_REDIRECTS", base.redirects).strip().lower()
        return cls(
            command_s=_env_float("MEDCOPILOT_PACS_DEADLINE_S", base.command_s),
            retrieval_s=_env_float("MEDCOPILOT_PACS_RETRIEVAL_S", base.retrieval_s),
            read_s=_env_float("MEDCOPILOT_PACS_READ_S", base.read_s),
            json_bytes=int(_env_float("MEDCOPILOT_PACS_MAX_JSON_MB", base.json_bytes / MIB) * MIB),
            part_bytes=int(_env_float("MEDCOPILOT_PACS_MAX_PART_MB", base.part_bytes / MIB) * MIB),
            workers=max(1, int(min(MAX_WORKERS, _env_float("MEDCOPILOT_PACS_WORKERS", base.workers)))),
            redirects=policy if policy in ("same-origin", "none") else base.redirects,
        )


class Deadline:
    """An overall time limit for one command or retrieval, shared by every request it makes."""

    def __init__(self, seconds: float, what: str, setting: str) -> None:
        self.seconds, self.what, self.setting = seconds, what, setting
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def check(self) -> float:
        """The seconds left; `pacs_deadline` once none are."""
        left = self.left()
        if left <= 0:
            raise PacsError(
                "pacs_deadline", f"{self.what} took longer than its {self.seconds:g} s deadline ({self.setting})"
            )
        return left

    def sooner(self, other: Deadline) -> Deadline:
        """Whichever of two deadlines ends first."""
        return self if self.end <= other.end else other
