"""Track B operation sets (Table 3 of the paper enables one advanced operation family per run)."""

from __future__ import annotations

import dataclasses
from typing import Any

from copilot.tools.registry import HandlerSpec, RegistryView

OPERATION_SETS: dict[str, frozenset[str] | None] = {
    "all": None,  # every analysis operator of the track
    "segmentation": frozenset({"segment_threshold", "segment_grow_from_seeds", "segment_statistics"}),
    "registration": frozenset({"register_volumes", "apply_transform", "resample_volume"}),
    "vista3d": frozenset({"vista3d_segment", "segment_statistics"}),
    "none": frozenset(),  # Track B prompt and budget without operators: the unregistered control
}
OPS_TITLES = {
    "segmentation": "Segmentation",
    "registration": "Registration",
    "vista3d": "3D VISTA (MONAI)",
    "all": "All operations",
    "none": "Control (no operators)",
}


class OpsRegistry(RegistryView):
    """A registry view whose analysis operators outside an operation set are refused as not in the track."""

    def __init__(self, base: Any, ops: str) -> None:
        if ops not in OPERATION_SETS:
            raise ValueError(f"unknown operation set {ops!r}; one of {', '.join(OPERATION_SETS)}")
        super().__init__(base)
        self.ops, self.allowed = ops, OPERATION_SETS[ops]

    def _view(self, spec: HandlerSpec) -> HandlerSpec:
        if spec.role != "analysis_operator" or self.allowed is None or spec.name in self.allowed:
            return spec
        return dataclasses.replace(spec, tracks=())


def registry_view(registry: Any, ops: str | None, protocol: str | None = None) -> Any:
    """The registry itself, or a view limited to an operation set and/or a tool protocol (`tools.protocols`)."""
    from copilot.tools.protocols import protocol_view

    return protocol_view(registry if not ops else OpsRegistry(registry, ops), protocol)
