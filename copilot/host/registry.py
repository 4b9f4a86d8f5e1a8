"""The handlers a host session offers: the kind's registry without the handlers that would replace or close
what the clinician has open, plus host-only handlers (e.g. listing QuPath's own annotations)."""

from __future__ import annotations

import dataclasses
from typing import Any

from copilot.errors import HandlerError
from copilot.tools.registry import HandlerSpec

# never offered on a clinician's own study: they would clear, replace or close it
HIDDEN = {"radiology": frozenset({"open_case"}), "pathology": frozenset({"load_case", "load_image", "close"})}


class HostRegistry:
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
