"""A registry view that withholds handlers (they are in no track, refused as such) and adds others: what a host
session offers on a clinician's own study, rebuilt by replay from the trace's `handlers_withheld` event."""

from __future__ import annotations

import dataclasses
from typing import Any

from copilot.errors import HandlerError
from copilot.tools.registry import HandlerSpec

WITHHELD_EVENT = "handlers_withheld"  # trace event naming the handlers a session withheld


class WithheldRegistry:
    """A registry view: `hidden` handlers are in no track (refused as such), `extra` registries add handlers."""

    def __init__(self, base: Any, hidden: frozenset[str] = frozenset(), extra: tuple[Any, ...] = ()) -> None:
        self.base, self.hidden, self.extra = base, hidden, extra
        self.kind = base.kind

    def _view(self, spec: HandlerSpec) -> HandlerSpec:
        return dataclasses.replace(spec, tracks=()) if spec.name in self.hidden else spec

    def get(self, name: str) -> HandlerSpec:
        for reg in self.extra:
            if name in reg:
                return reg.get(name)
        if name not in self.base:
            raise HandlerError("unknown_handler", f"no handler named {name!r}")
        return self._view(self.base.get(name))

    def names(self) -> list[str]:
        return [*self.base.names(), *(n for reg in self.extra for n in reg.names())]

    def specs(self, track: str | None = None) -> list[HandlerSpec]:
        specs = [*map(self._view, self.base.specs(None)), *(s for reg in self.extra for s in reg.specs(None))]
        return [s for s in specs if track is None or track in s.tracks]

    def __contains__(self, name: object) -> bool:
        return name in self.base or any(name in reg for reg in self.extra)
