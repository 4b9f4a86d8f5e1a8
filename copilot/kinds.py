"""Viewer kinds: what differs between radiology and pathology cases, declared once.

Each kind names its viewer factory, its handler registry, the call that opens a case's inputs, the
observation an agent starts from, the views and layout a desktop host shows, whether positions are slide pixels
or RAS millimetres, the evidence lines an answer may state, what a study's privacy notes name and its system
prompt. Callers look the kind up instead of switching on its name; a third kind is its viewer, its handlers and
one declaration (the fields after `slicer_api` have defaults, so a kind sets only those it uses), offered by an
entry point of the `medcopilot.kinds` group (the two below are the core's own, declared the same way in
pyproject.toml) or registered in-process with `register_kind`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from copilot import plugins
from copilot.cases.pack import CasePack
from copilot.engine.montage import slide_montage, volume_montages
from copilot.engine.slide.viewer import EmbeddedSlideViewer
from copilot.engine.volume.viewer import EmbeddedVolumeViewer
from copilot.kind_names import PATHOLOGY, RADIOLOGY
from copilot.resources import declare_prompt
from copilot.slicer_backend import slicer_viewer
from copilot.tools import PATHOLOGY as PATHOLOGY_HANDLERS
from copilot.tools import RADIOLOGY as RADIOLOGY_HANDLERS
from copilot.tools import Registry
from copilot.viewer.protocol import Viewer


@dataclass(frozen=True)
class Checkpoint:
    """One workflow checkpoint an episode is graded on (the benchmark's workflow audit): id (stage prefix P/A/D/R),
    what it checks, critical or regular, and the name of the audit rule that grades it."""

    id: str
    title: str
    critical: bool
    rule: str


@dataclass(frozen=True)
class ViewerKind:
    """One kind of case and the viewer that shows it."""

    name: str
    new_viewer: Callable[[], Viewer]
    registry: Registry
    open_handler: str  # opens the case's inputs (called by the system when a session starts)
    opening: tuple[str, dict[str, Any]]  # the observation an agent's episode starts from
    view_names: tuple[str, ...]  # the views a host shows, in order
    stepwise: bool  # one tool per round, each round answered with the viewer's state (Appendix H.2 protocol)
    slicer_api: bool  # whether the read-only /slicer subset is served
    slice_views: bool = False  # a scene of volumes in slice views: layouts, W/L presets, fusion, blank-view checks
    backends: dict[str, Callable[[], Viewer]] = field(default_factory=dict)  # other viewers by backend name
    host_app: str = "—"  # the desktop application its host runs in (the report's viewer column)
    layout: str = "views"  # the desktop layout a case opens in unless its module asks for another ('views': its own)
    slide_coordinates: bool = False  # positions are level-0 slide pixels (x, y), not RAS millimetres
    evidence_lines: tuple[str, ...] = ()  # free-form EVIDENCE lines an answer may state (panel.answer_evidence)
    image_name: str = "image"  # what names its pictures, burnt into every render ('series', 'slide')
    shared_data: str = "rendered images and tool results"  # what a model service off this machine receives
    system_prompt: str | Path = ""  # its benchmark system prompt: text, or a file ('': prompts/KIND_system.txt)
    checkpoints: tuple[Checkpoint, ...] = ()  # workflow checkpoints of its episodes beside the audit's common ones
    claim_boundaries: tuple[str, ...] = ()  # overclaims the workflow audit looks for (its boundary names)
    montage: Callable[[CasePack], dict[str, Image.Image]] | None = None  # Track C's pictures of a case (None: none)

    @property
    def display(self) -> str:
        """How a desktop shows its scene: 'slices' (volumes in slice views), 'slide' (one slide to pan and zoom) or
        'pictures' (each of its views as its viewer renders it, fitted to a pane: any other kind's display)."""
        return "slices" if self.slice_views else "slide" if self.slide_coordinates else "pictures"

    def viewer(self, backend: str = "embedded") -> Viewer:
        """A fresh viewer of this kind on a backend ('embedded' by default)."""
        if backend == "embedded":
            return self.new_viewer()
        if backend not in self.backends:
            raise ValueError(f"no {backend!r} backend for {self.name} cases")
        return self.backends[backend]()


RADIOLOGY_KIND = ViewerKind(
    RADIOLOGY,
    EmbeddedVolumeViewer,
    RADIOLOGY_HANDLERS,
    "open_case",
    ("observe", {"view": "all", "size": 512, "include_metadata": True}),
    ("red", "yellow", "green"),
    stepwise=False,
    slicer_api=True,
    slice_views=True,
    backends={"slicer": slicer_viewer},  # Slicer's MRML libraries (slicer-core, imported when chosen)
    host_app="Slicer",
    layout="three_up",
    evidence_lines=("key_slice", "distance", "point"),
    image_name="series",
    shared_data="rendered slice images, tool results and the series inventory (modality, size, spacing, orientation)",
    checkpoints=(Checkpoint("A2", "a plane through the lesion was shown", True, "target_seen"),),
    claim_boundaries=("measurement_not_taken", "series_not_shown", "certainty_beyond_evidence"),
    montage=volume_montages,
)
PATHOLOGY_KIND = ViewerKind(
    PATHOLOGY,
    EmbeddedSlideViewer,
    PATHOLOGY_HANDLERS,
    "load_case",
    ("focus_qupath", {}),
    ("viewer",),
    stepwise=True,
    slicer_api=False,
    host_app="QuPath",
    layout="slide",
    slide_coordinates=True,
    evidence_lines=("wsi_point",),
    image_name="slide",
    shared_data="rendered slide fields, tool results and the slide inventory (size, µm/px, levels)",
    checkpoints=(
        Checkpoint("A2", "a field over the target region was shown", True, "target_seen"),
        Checkpoint("A5", "the slide was examined at 10× or more", False, "magnified"),
    ),
    claim_boundaries=(
        "measurement_not_taken", "magnification_not_reached", "below_minimum_magnification", "certainty_beyond_evidence"
    ),
    montage=slide_montage,
)


_KINDS: dict[str, ViewerKind] = {}  # the declared kinds by name (`register_kind`)
_DISCOVERED: list[bool] = []  # whether the `medcopilot.kinds` entry points were read (once per process)


def kinds() -> dict[str, ViewerKind]:
    """The declared kinds by name; the first call reads the `medcopilot.kinds` entry points (one that fails to load
    or register is reported by `plugins.problems`, the others stay). It is the registry itself: declare a kind with
    `register_kind`."""
    if not _DISCOVERED:
        _DISCOVERED.append(True)  # first: a plug-in whose import asks for the kinds sees them as being read
        for name, kind in plugins.load(plugins.KINDS_GROUP).items():
            try:
                _accept(name, kind)
            except (TypeError, ValueError) as exc:
                plugins.refuse(plugins.KINDS_GROUP, name, exc)
    return _KINDS


def _accept(name: str, kind: object) -> None:
    """Register a kind an entry point offers; its entry point's name must be the kind's."""
    if not isinstance(kind, ViewerKind):
        raise TypeError(f"expected a ViewerKind, got {type(kind).__name__}")
    if kind.name != name:
        raise ValueError(f"the entry point {name!r} offers the kind {kind.name!r}")
    register_kind(kind)


def register_kind(kind: ViewerKind) -> ViewerKind:
    """Declare a viewer kind (a third kind is this call and its viewer and handlers); a second kind of the same
    name, or a registry of another kind, is an error."""
    if _KINDS.get(kind.name, kind) is not kind:
        raise ValueError(f"viewer kind {kind.name!r} is declared twice")
    if kind.registry.kind != kind.name:
        raise ValueError(f"viewer kind {kind.name!r} has the handlers of {kind.registry.kind!r}")
    if kind.open_handler not in kind.registry:
        raise ValueError(f"viewer kind {kind.name!r}: its open handler {kind.open_handler!r} is not declared")
    _KINDS[kind.name] = kind
    plugins.declare(plugins.KINDS_GROUP, kind.name)
    if kind.system_prompt:
        declare_prompt(f"{kind.name}_system", kind.system_prompt)
    return kind


def viewer_kind(name: str) -> ViewerKind:
    """The kind of a name ('radiology', 'pathology'), or a ValueError naming the known ones (and any plug-in of
    kinds that failed to load)."""
    return plugins.lookup(plugins.KINDS_GROUP, kinds(), name, "viewer kind")
