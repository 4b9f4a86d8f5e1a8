"""Tool protocols: which handlers a model sees, and whether the workflow guards speak.

- `harness` (the product surface): every handler of the track, evidence handlers and workflow-guard warnings
  included.
- `paper`: exactly the model-visible tools the paper lists, so scores are comparable with its Tables 1–3:
  radiology Track A = Table 9's 17 3D Slicer tools; pathology = Table 10's five QuPath direct tools; Track B
  adds the analysis operators of Appendix B's named bridge handlers (DICOM import, measurement,
  registration, segmentation, DICOM SEG export: `PAPER_BRIDGE_HANDLERS`, nothing else), limited by the run's
  operation set. No guard warnings reach
  the model or the trace. The system's own operations of Appendix B's QuPath registry (loading the case)
  stay callable by the runtime but are not offered to the model.
"""

from __future__ import annotations

import dataclasses

from copilot.kind_names import PATHOLOGY, RADIOLOGY
from copilot.tools.registry import HandlerContext, HandlerOutput, Handlers, HandlerSpec, RegistryView
from copilot.viewer.protocol import ViewerBase

PROTOCOLS = ("harness", "paper")
PAPER_RADIOLOGY_TOOLS = (  # Table 9, in the paper's order
    "ping", "open_case", "select_volume", "observe", "scroll", "zoom", "fit", "set_slice_offset",
    "get_slice_offset_range", "recover_standard_views", "image_coords_to_ras", "get_viewer_state", "wl",
    "window_preset", "jump", "set_layout", "fusion",
)  # fmt: skip
PAPER_PATHOLOGY_TOOLS = ("zoom", "pan", "focus_qupath", "capture_viewer", "viewer_point_to_wsi_coordinate")  # Table 10
PAPER_SYSTEM_OPERATIONS = ("load_case",)  # run by the runtime when a slide episode starts, never offered
PAPER_BRIDGE_HANDLERS = (  # Appendix B: DICOM import, measurement, registration, segmentation, DICOM SEG export
    "import_dicom", "segment_statistics", "register_volumes", "apply_transform", "resample_volume",
    "segment_threshold", "segment_grow_from_seeds", "vista3d_segment", "export_dicom_seg",
)  # fmt: skip
PAPER_SOURCE = "MedOpenClaw/MedFlow-Bench paper, Appendix B and Tables 9-10"


PAPER_TOOLS = {RADIOLOGY: PAPER_RADIOLOGY_TOOLS, PATHOLOGY: PAPER_PATHOLOGY_TOOLS}  # the paper's two viewer kinds


def paper_tools(kind: str) -> tuple[str, ...]:
    """The model-visible viewer tools of the paper for a viewer kind (Track B adds the operators); none for a
    kind the paper does not have."""
    return PAPER_TOOLS.get(kind, ())


def _quiet(spec: HandlerSpec) -> HandlerSpec:
    """The same handler with its workflow-guard warnings dropped from the result."""

    def impl(ctx: HandlerContext[ViewerBase], **kwargs: object) -> HandlerOutput:
        out = spec.impl(ctx, **kwargs)
        out.result.pop("warnings", None)
        return out

    return dataclasses.replace(spec, impl=impl)


class PaperRegistry(RegistryView):
    """A registry view offering only the paper's tools of its kind (and the operators in Track B), unguarded."""

    def __init__(self, base: Handlers) -> None:
        super().__init__(base)
        self.visible = set(paper_tools(base.kind))

    def _view(self, spec: HandlerSpec) -> HandlerSpec:
        if spec.name in self.visible:
            return _quiet(spec)
        if spec.role == "analysis_operator" and spec.name in PAPER_BRIDGE_HANDLERS:
            return _quiet(dataclasses.replace(spec, tracks=tuple(t for t in spec.tracks if t == "B")))
        return dataclasses.replace(spec, tracks=())

    def get(self, name: str) -> HandlerSpec:
        if name in PAPER_SYSTEM_OPERATIONS:
            return _quiet(self.base.get(name))  # callable by the runtime, not listed for the model
        return super().get(name)


def protocol_view(registry: Handlers, protocol: str | None) -> Handlers:
    """The registry as a protocol shows it (`harness` or None: unchanged)."""
    if protocol in (None, "", "harness"):
        return registry
    if protocol != "paper":
        raise ValueError(f"unknown protocol {protocol!r}; one of {', '.join(PROTOCOLS)}")
    return PaperRegistry(registry)
