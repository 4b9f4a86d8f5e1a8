"""The embedded radiology viewer: a scene of named volumes shown in three Slicer-like slice views.

It implements the `RadiologyViewer` protocol. Every mutating method validates its inputs
before it changes anything and raises `ViewerError` otherwise; `export_state`/`restore_state`
let callers roll back a multi-step operation atomically.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from copilot.engine.geometry import VIEW_NAMES, VIEW_ORIENTATION, SliceView, slice_spacing, voxel_box_corners
from copilot.engine.peek import Peek, peek_volumes
from copilot.engine.volume import view_rules as rules
from copilot.engine.volume.derived import SEGMENT_COLOURS, Segment, TransformNode, outline
from copilot.engine.volume.display import DisplaySettings, auto_window_level, default_display, preset_settings
from copilot.engine.volume.image import Volume, inventory_facts
from copilot.engine.volume.render import RENDERER, Layer, check_renderer, compose, corner_text, draw_corners


@dataclass
class _SceneState:
    volumes: dict[str, Volume] = field(default_factory=dict)
    display: dict[str, DisplaySettings] = field(default_factory=dict)
    views: dict[str, SliceView] = field(default_factory=dict)
    layout: str = "three_up"
    background: str | None = None
    foreground: str | None = None
    opacity: float = 0.0
    fusion_mode: str = "blend"
    slice_step: float | None = None
    next_id: int = 1
    segments: dict[str, Segment] = field(default_factory=dict)
    transforms: dict[str, TransformNode] = field(default_factory=dict)


class EmbeddedVolumeViewer:
    """Volumes, display settings and three slice views; renders views to RGB images."""

    kind = "radiology"

    def __init__(self, renderer: str = RENDERER) -> None:
        self._s = _SceneState(views={n: SliceView(n, VIEW_ORIENTATION[n]) for n in VIEW_NAMES})
        self.renderer = check_renderer(renderer)  # the slice renderer (a replay uses the one its trace names)

    # ----- transactional state -----
    def export_state(self) -> _SceneState:
        """An independent copy of the whole viewer state (volumes are shared, being immutable)."""
        s = self._s
        return _SceneState(
            volumes=dict(s.volumes),
            display=copy.deepcopy(s.display),
            views=copy.deepcopy(s.views),
            layout=s.layout,
            background=s.background,
            foreground=s.foreground,
            opacity=s.opacity,
            fusion_mode=s.fusion_mode,
            slice_step=s.slice_step,
            next_id=s.next_id,
            segments=dict(s.segments),
            transforms=dict(s.transforms),
        )

    def restore_state(self, state: _SceneState) -> None:
        """Put back a state taken with `export_state`."""
        self._s = state

    # ----- scene -----
    def add_volume(self, volume: Volume) -> str:
        """Add a volume to the scene; returns its node id (Slicer-style)."""
        vid = self._new_id("vtkMRMLScalarVolumeNode")
        self._s.volumes[vid] = volume
        self._s.display[vid] = default_display(volume)
        return vid

    def _new_id(self, prefix: str, table: dict[str, Any] | None = None, name: str = "", kind: str = "") -> str:
        """A fresh Slicer-style node id; with a table, the new node's name must be free in it."""
        if table is not None:
            rules.check_name_free(table, name, kind)
        nid = f"{prefix}{self._s.next_id}"
        self._s.next_id += 1
        return nid

    def add_segment(self, segment: Segment) -> str:
        """Add a segment (a label map on its source volume's grid); returns its node id."""
        sid = self._new_id("vtkMRMLSegmentationNode", self._s.segments, segment.name, "segment")
        segment.colour = SEGMENT_COLOURS[len(self._s.segments) % len(SEGMENT_COLOURS)]
        self._s.segments[sid] = segment
        return sid

    def add_transform(self, node: TransformNode) -> str:
        tid = self._new_id("vtkMRMLLinearTransformNode", self._s.transforms, node.name, "transform")
        self._s.transforms[tid] = node
        return tid

    def segment(self, ref: str) -> tuple[str, Segment]:
        """A segment by node id or name; unknown or stale references are errors, never a fallback."""
        return rules.lookup(self._s.segments, ref, "segment")

    def transform(self, ref: str) -> tuple[str, TransformNode]:
        return rules.lookup(self._s.transforms, ref, "transform")

    def volume_name_taken(self, name: str) -> bool:
        return any(v.name == name for v in self._s.volumes.values())

    def clear(self) -> None:
        """Remove every volume and reset views and fusion; node ids are never reused (as in an MRML scene), so
        an id from before cannot silently name a different node."""
        views = {n: SliceView(n, VIEW_ORIENTATION[n]) for n in VIEW_NAMES}
        self._s = _SceneState(views=views, next_id=self._s.next_id)

    def volume(self, vid: str) -> Volume:
        return self._s.volumes[vid]

    def volume_ids(self) -> list[str]:
        return list(self._s.volumes)

    def resolve_volume(self, volume_id: str | None = None, volume_name: str | None = None) -> str:
        """Node id for an id or a name (exact, then case-insensitive); the active volume when neither."""
        return rules.resolve_volume(self._s.volumes, self._s.background, volume_id, volume_name)

    def inventory(self) -> list[dict[str, Any]]:
        """Scene inventory: one entry per volume with its geometry."""
        out = []
        for vid, v in self._s.volumes.items():
            out.append(
                {
                    "id": vid,
                    "name": v.name,
                    "modality": v.modality,
                    "dimensions": list(v.dimensions),
                    "spacing_mm": [round(s, 6) for s in v.spacing],
                    "origin_ras": [round(float(x), 6) for x in v.ijk_to_ras[:3, 3]],
                    "ijk_to_ras": [[round(float(x), 6) for x in row] for row in v.ijk_to_ras],
                    "value_range": [round(x, 6) for x in v.value_range],
                    **inventory_facts(v),
                }
            )
        return out

    # ----- views -----
    def view(self, name: str) -> SliceView:
        rules.check_view(name)
        return self._s.views[name]

    @property
    def layout(self) -> str:
        return self._s.layout

    def layout_views(self) -> tuple[str, ...]:
        return rules.LAYOUTS[self._s.layout]

    def set_layout(self, layout: str) -> None:
        self._s.layout = rules.layout_name(layout)

    def set_orientation(self, view: str, orientation: str) -> None:
        """Put a view in a standard orientation preset and fit it."""
        rules.check_orientation(orientation)
        self.view(view).orientation = orientation
        self.fit(view)

    def _reference(self) -> Volume:
        vid = self.resolve_volume()
        return self._s.volumes[vid]

    def slice_offset_range(self, view: str) -> tuple[float, float]:
        """Canonical offsets of the first and last slice of the background volume in this view (Slicer's
        slider range: voxel centres; a single slice gets one blank step on either side)."""
        v = self.view(view)
        vol = self._reference()
        lo, hi = v.offset_range(vol.corners_ras())
        step = slice_spacing(vol.ijk_to_ras, v.normal)
        if hi - lo < step:
            mid = (lo + hi) / 2.0
            return (mid - step, mid + step)
        return (lo, hi)

    def slice_step(self, view: str) -> float:
        """Slicer's slider step along the view normal (the open_case spacing if given)."""
        if self._s.slice_step is not None:
            return self._s.slice_step
        return slice_spacing(self._reference().ijk_to_ras, self.view(view).normal)

    def set_slice_step(self, step: float | None) -> None:
        rules.check_slice_step(step)
        self._s.slice_step = step

    def check_offset(self, view: str, offset: float) -> None:
        """Raise unless `offset` lies inside the view's slice offset range."""
        rules.check_offset(view, offset, *self.slice_offset_range(view))

    def set_slice_offset(self, view: str, offset: float) -> None:
        self.check_offset(view, offset)
        self.view(view).set_offset(offset)

    def zoom(self, view: str, factor: float, anchor_ras: np.ndarray | None = None) -> None:
        """Zoom by `factor` (>1 magnifies) about a RAS point fixed on screen (default: the centre)."""
        v = self.view(view)
        rules.check_zoom_factor(factor)
        rules.check_zoom_fov(factor, v.fov, self._reference().corners_ras())
        v.zoom(factor, anchor_ras)

    def fit(self, view: str) -> None:
        """Slicer's FitSliceToAll field of view for the background volume; the offset is kept."""
        vol = self._reference()
        self.view(view).fit(voxel_box_corners(vol.ijk_to_ras, vol.dimensions))

    def recover_standard_views(self, vid: str | None = None) -> None:
        """Standard orientations, fitted, each offset at the volume centre; `vid` becomes the background."""
        vid = vid or self.resolve_volume()
        self.select_volume(vid)
        vol = self._s.volumes[vid]
        centre = vol.center_ras()
        for name in VIEW_NAMES:
            v = self._s.views[name]
            v.orientation = VIEW_ORIENTATION[name]
            v.center = centre.copy()
            v.fit(voxel_box_corners(vol.ijk_to_ras, vol.dimensions))

    def jump(self, ras: np.ndarray) -> None:
        """Centre every view on a RAS point (Slicer's JumpAllSlices in centred mode)."""
        ras = rules.jump_point(ras)
        rules.check_inside(ras, self._reference().corners_ras())
        for v in self._s.views.values():
            v.center = ras.copy()

    # ----- display -----
    def display(self, vid: str) -> DisplaySettings:
        return self._s.display[vid]

    def set_window_level(self, vid: str, window: float, level: float) -> None:
        rules.check_window_level(window, level)
        d = self._s.display[vid]
        d.window, d.level, d.auto, d.preset = float(window), float(level), False, None

    def set_auto_window_level(self, vid: str) -> None:
        d = self._s.display[vid]
        d.window, d.level = auto_window_level(self._s.volumes[vid])
        d.auto, d.preset = True, None

    def apply_preset(self, vid: str, preset: str) -> None:
        rules.check_preset(preset)
        self._s.display[vid] = preset_settings(self._s.volumes[vid], preset)

    # ----- layers -----
    def select_volume(self, vid: str) -> None:
        """Show a volume as the background of every view (the active volume)."""
        self.resolve_volume(volume_id=vid)
        self._s.background = vid
        if self._s.foreground == vid:
            self._s.foreground, self._s.opacity = None, 0.0

    def set_fusion(self, bg: str, fg: str | None, opacity: float, mode: str = "blend") -> None:
        rules.check_fusion(bg, fg, opacity, mode)
        self._s.background, self._s.foreground = bg, fg
        self._s.opacity = float(opacity) if fg is not None else 0.0
        self._s.fusion_mode = mode

    @property
    def background(self) -> str | None:
        return self._s.background

    def peek(self, request: Peek) -> dict[str, Image.Image]:
        """Images of a `Peek` (the session puts the state back afterwards)."""
        return peek_volumes(self, request)

    def geometry(self, view: str) -> SliceView:
        """A copy of a slice view's geometry, for a host's own conversions."""
        return copy.deepcopy(self.view(view))

    def scene_data(self) -> dict[str, Any]:
        """For a host's 3D view and value readout: the active volume (immutable, shared), its window/level, the
        segments and the foreground volume (or None); {} without a volume."""
        s, vid = self._s, self._s.background
        if vid is None:
            return {}
        d = s.display[vid]
        fg = s.volumes[s.foreground] if s.foreground else None
        return {"volume": s.volumes[vid], "window": d.window, "level": d.level, "segments": list(s.segments.values()),
                "foreground": fg}  # fmt: skip

    # ----- rendering and conversions -----
    def render(self, view: str, size: tuple[int, int], remember: bool = True) -> Image.Image:
        """RGB image of a view with corner overlays; remembers the size for later point conversions."""
        v = self.view(view)
        s = self._s
        bg = Layer(s.volumes[s.background], s.display[s.background]) if s.background else None
        fg = Layer(s.volumes[s.foreground], s.display[s.foreground]) if s.foreground else None
        image = compose(v, size, bg, fg, s.opacity, s.fusion_mode, self.renderer)
        if s.segments:
            image = self._draw_outlines(image, v, size)
        draw_corners(image, self._overlay_text(v))
        if remember:
            v.last_size = (int(size[0]), int(size[1]))
        return image

    def _draw_outlines(self, image: Image.Image, v: SliceView, size: tuple[int, int]) -> Image.Image:
        rgb = np.array(image.convert("RGB"))
        m = v.image_to_ras_matrix(size)
        for seg in self._s.segments.values():
            rgb[outline(seg, m, size)] = seg.colour
        return Image.fromarray(rgb)

    def _overlay_text(self, v: SliceView) -> dict[str, list[str]]:
        s = self._s
        bg = (s.volumes[s.background].name, s.display[s.background]) if s.background else None
        fg = s.volumes[s.foreground].name if s.foreground else None
        return corner_text(v, bg, fg, s.opacity)

    def point_to_ras(self, view: str, point_1000: tuple[float, float]) -> np.ndarray:
        """RAS of a 0–999 point on the view's last rendered image."""
        return self.view(view).norm1000_to_ras(point_1000)

    def state(self) -> dict[str, Any]:
        """JSON-ready snapshot of what is shown: layers, layout, views, display settings."""
        s = self._s

        def name(vid: str | None) -> str | None:
            return s.volumes[vid].name if vid else None

        return {
            "active_volume": s.background,
            "active_volume_name": name(s.background),
            "background_volume": s.background,
            "foreground_volume": s.foreground,
            "foreground_volume_name": name(s.foreground),
            "foreground_opacity": round(s.opacity, 6),
            "fusion_mode": s.fusion_mode,
            "layout": s.layout,
            "slice_step_mm": s.slice_step,
            "views": {n: v.snapshot() for n, v in s.views.items()},
            "display": {vid: d.snapshot() for vid, d in s.display.items()},
            "volumes": [{"id": vid, "name": v.name, **_frame_facts(v)} for vid, v in s.volumes.items()],
            "segments": [
                {"id": sid, "name": sg.name, "source": sg.source, "voxels": sg.voxels()}
                for sid, sg in s.segments.items()
            ],
            "transforms": [{"id": tid, **t.snapshot()} for tid, t in s.transforms.items()],
        }


def _frame_facts(volume: Volume) -> dict[str, int]:
    """The frame shown of a volume opened from a 4D file, and the number of frames ({} for a 3D file)."""
    facts = inventory_facts(volume)
    return {k: facts[k] for k in ("frame", "frames") if k in facts}
