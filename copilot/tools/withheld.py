"""A registry view that withholds handlers (they are in no track, refused as such) and adds others: what a host
session offers on a clinician's own study, rebuilt by replay from the trace's `handlers_withheld` event."""

from __future__ import annotations

import dataclasses

from copilot.tools.registry import Handlers, HandlerSpec, RegistryView

WITHHELD_EVENT = "handlers_withheld"  # trace event naming the handlers a session withheld


class WithheldRegistry(RegistryView):
    """A registry view: `hidden` handlers are in no track (refused as such), `extra` registries add handlers."""

    def __init__(self, base: Handlers, hidden: frozenset[str] = frozenset(), extra: tuple[Handlers, ...] = ()) -> None:
        super().__init__(base)
        self.hidden, self.extra = hidden, extra

    def _view(self, spec: HandlerSpec) -> HandlerSpec:
        return dataclasses.replace(spec, tracks=()) if spec.name in self.hidden else spec

    def get(self, name: str) -> HandlerSpec:
        owner = next((reg for reg in self.extra if name in reg), None)
        return owner.get(name) if owner is not None else super().get(name)

    def names(self) -> list[str]:
        return [*self.base.names(), *(n for reg in self.extra for n in reg.names())]

    def specs(self, track: str | None = None) -> list[HandlerSpec]:
        extra = [s for reg in self.extra for s in reg.specs(None) if track is None or track in s.tracks]
        return [*super().specs(track), *extra]

    def __contains__(self, name: object) -> bool:
        return name in self.base or any(name in reg for reg in self.extra)
