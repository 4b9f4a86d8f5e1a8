"""`SlicerSceneViewer`: the radiology viewer protocol implemented on a Slicer MRML scene.

Every piece of viewer state lives in Slicer's nodes: volumes are scalar volume nodes, window/level and
colour are their display nodes, slice geometry is the Red/Yellow/Green slice nodes (SliceToRAS, field of
view, dimensions, orientation presets), the fit, the offset range and the slider step are
vtkMRMLSliceLogic's, fusion is the slice composite nodes, the layout is the layout node, segments are
segmentation nodes and registrations are linear transform nodes. Images are the output of each slice
logic's reslice/blend pipeline, with the project's corner annotations (and segment outlines) drawn on top.
Node ids are the ids handlers report. `export_state`/`restore_state` snapshot the scene itself (its
nodes and their settings), so a refused call's rollback restores Slicer's scene.

Handlers speak canonical offsets (axial S, sagittal R, coronal A); Slicer's slice nodes hold native
offsets (Slicer 5's sagittal normal is L); `copilot.engine.geometry` converts between the two.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from vtkmodules.util import numpy_support
from vtkmodules.vtkCommonCore import reference
from vtkmodules.vtkCommonDataModel import vtkImageData
from vtkmodules.vtkCommonMath import vtkMatrix4x4

from copilot.engine.geometry import (
    ORIENTATION_MATRICES,
    VIEW_NAMES,
    VIEW_ORIENTATION,
    SliceView,
    canonical_range,
    native_offset,
)
from copilot.engine.peek import Peek, peek_volumes
from copilot.engine.volume import view_rules as rules
from copilot.engine.volume.derived import SEGMENT_COLOURS, Segment, TransformNode, outline
from copilot.engine.volume.display import DisplaySettings, auto_window_level, default_display, preset_settings
from copilot.engine.volume.image import VOLUME_SUFFIXES, Volume, inventory_facts
from copilot.engine.volume.render import corner_text, draw_corners
from copilot.slicer_backend.markups import EvidenceMarkups
from copilot.slicer_backend.mrml import mrml
from copilot.slicer_backend.scene import SlicerScene, attach, standalone_scene

LAYOUT_IDS = {"three_up": 3, "one_up_red": 6, "one_up_yellow": 7, "one_up_green": 8}  # vtkMRMLLayoutNode
COLOR_NODE_IDS = {"grey": "vtkMRMLColorTableNodeGrey", "pet_heat": "vtkMRMLPETProceduralColorNodePET-Heat"}
COMPOSITING = {"blend": 0, "add": 2}  # vtkMRMLSliceCompositeNode::Alpha, ::Add
AUTO_ATTR, PRESET_ATTR, OWNER_ATTR = "MedCopilot.AutoWindowLevel", "MedCopilot.Preset", "MedCopilot.Node"
# Nodes a call may add (and a rollback removes); view, layout and singleton nodes are only ever modified.
DATA_CLASSES = (
    "vtkMRMLVolumeNode",
    "vtkMRMLSegmentationNode",
    "vtkMRMLTransformNode",
    "vtkMRMLMarkupsNode",
    "vtkMRMLDisplayNode",
    "vtkMRMLStorageNode",
)


def vtk_matrix(m: np.ndarray) -> vtkMatrix4x4:
    out = vtkMatrix4x4()
    for r in range(4):
        for c in range(4):
            out.SetElement(r, c, float(m[r, c]))
    return out


def np_matrix(m: vtkMatrix4x4) -> np.ndarray:
    return np.array([[m.GetElement(r, c) for c in range(4)] for r in range(4)])


def over_black(rgba: np.ndarray, channels: int) -> np.ndarray:
    """The first `channels` colour channels of 8-bit RGBA composited over black: c·a // 255, exactly (the
    division done as (x + 1 + (x >> 8)) >> 8, equal to x // 255 for every 8-bit product), or the
    channels themselves where every pixel is opaque."""
    alpha = rgba[..., 3]
    if bool((alpha == 255).all()):
        out = rgba[..., 0] if channels == 1 else rgba[..., :3]
        return np.ascontiguousarray(out)
    planes = []
    for c in range(channels):
        x = rgba[..., c].astype(np.uint16)
        x *= alpha
        x += 1 + (x >> 8)
        x >>= 8
        planes.append(x.astype(np.uint8))
    return planes[0] if channels == 1 else np.stack(planes, axis=-1)


def image_data(array: np.ndarray) -> vtkImageData:
    """A vtkImageData holding a copy of a [k, j, i] array (VTK's x is i, fastest)."""
    k, j, i = array.shape
    img = vtkImageData()
    img.SetDimensions(i, j, k)
    img.GetPointData().SetScalars(numpy_support.numpy_to_vtk(np.ascontiguousarray(array).ravel(), deep=True))
    return img


@dataclass
class SceneSnapshot:
    """What a call may change: the scene's nodes (by id) and every setting the viewer writes."""

    nodes: list[tuple[str, Any]]
    volumes: dict[str, Volume]
    segments: dict[str, Segment]
    transforms: dict[str, TransformNode]
    slices: dict[str, tuple[Any, ...]]
    composites: dict[str, tuple[Any, ...]]
    displays: dict[str, tuple[Any, ...]]
    layout: int
    extra: dict[str, Any] = field(default_factory=dict)


class SlicerSceneViewer:
    """Volumes, display and three slice views held in a Slicer MRML scene; renders with Slicer's slice logics."""

    kind = "radiology"

    def __init__(self, scene: Any = None, app_logic: Any = None, adopt: bool = False) -> None:
        """A viewer on a new standalone scene, or on a given one. With `adopt` the scene is the clinician's: no
        node is removed and no view reset, the slice nodes keep the sizes of the clinician's views (renders of
        other sizes are remembered here, not written into them) and `clear` is refused."""
        self.adopted = adopt
        self.mrml: SlicerScene = standalone_scene() if scene is None else attach(scene, app_logic, adopt)
        self.scene = self.mrml.scene
        self._volumes: dict[str, Volume] = {}
        self._segments: dict[str, Segment] = {}
        self._transforms: dict[str, TransformNode] = {}
        self._markups: EvidenceMarkups | None = None
        self._shown_size: dict[str, tuple[int, int]] = {}  # adopted scene: the last image's size per view
        if adopt:
            return
        for node in self._nodes_where(OWNER_ATTR):  # left by an earlier session on the same scene
            self._remove(node)
        for name in VIEW_NAMES:
            self._reset_view(name)

    def _nodes_where(self, attribute: str) -> list[Any]:
        scene = self.scene
        nodes = [scene.GetNthNode(i) for i in range(scene.GetNumberOfNodes())]
        return [n for n in nodes if n.GetAttribute(attribute) == "1"]

    def _own(self, node: Any) -> Any:
        """Tag a node as made by this project (a later session on the same scene removes it)."""
        node.SetAttribute(OWNER_ATTR, "1")
        return node

    def _remove(self, node: Any) -> None:
        """Remove a data node with its display and storage nodes."""
        displays = [node.GetNthDisplayNode(i) for i in range(node.GetNumberOfDisplayNodes())]
        storage = node.GetStorageNode() if hasattr(node, "GetStorageNode") else None
        self.scene.RemoveNode(node)
        for extra in [*displays, storage]:
            if extra is not None and self.scene.GetNodeByID(extra.GetID()) is not None:
                self.scene.RemoveNode(extra)

    # ----- nodes -----
    def slice_node(self, view: str) -> Any:
        return self.mrml.slice_logics[view].GetSliceNode()

    def slice_logic(self, view: str) -> Any:
        return self.mrml.slice_logics[view]

    def composite_node(self, view: str) -> Any:
        return self.mrml.slice_logics[view].GetSliceCompositeNode()

    def volume_node(self, vid: str) -> Any:
        return self.scene.GetNodeByID(vid)

    def _display_node(self, vid: str) -> Any:
        return self.volume_node(vid).GetDisplayNode()

    def _reset_view(self, name: str) -> None:
        node = self.slice_node(name)
        node.SetOrientation(VIEW_ORIENTATION[name].capitalize())
        node.SetSliceSpacingModeToAutomatic()
        node.SetFieldOfView(250.0, 250.0, node.GetFieldOfView()[2])
        node.SetDimensions(512, 512, 1)
        node.UpdateMatrices()

    # ----- transactional state -----
    def export_state(self) -> SceneSnapshot:
        """A snapshot of the scene: its node list and the settings of slice, composite, display and layout nodes."""
        scene = self.scene
        nodes = [(scene.GetNthNode(i).GetID(), scene.GetNthNode(i)) for i in range(scene.GetNumberOfNodes())]
        slices, composites = {}, {}
        for name in VIEW_NAMES:
            n = self.slice_node(name)
            slices[name] = (
                np_matrix(n.GetSliceToRAS()),
                tuple(n.GetFieldOfView()),
                tuple(n.GetDimensions()),
                n.GetOrientation(),
                n.GetSliceSpacingMode(),
                tuple(n.GetPrescribedSliceSpacing()),
            )
            c = self.composite_node(name)
            composites[name] = (
                c.GetBackgroundVolumeID(),
                c.GetForegroundVolumeID(),
                c.GetForegroundOpacity(),
                c.GetCompositing(),
            )
        displays = {}
        for vid in self._volumes:
            d = self._display_node(vid)
            displays[vid] = (
                d.GetWindow(),
                d.GetLevel(),
                d.GetColorNodeID(),
                d.GetAttribute(AUTO_ATTR),
                d.GetAttribute(PRESET_ATTR),
            )
        return SceneSnapshot(
            nodes,
            dict(self._volumes),
            dict(self._segments),
            dict(self._transforms),
            slices,
            composites,
            displays,
            self.mrml.layout_node.GetViewArrangement(),
            {"shown_size": dict(self._shown_size)},
        )

    def restore_state(self, state: SceneSnapshot) -> None:
        """Put the scene back as `export_state` saw it: same nodes (same ids), same settings."""
        scene = self.scene
        keep = {nid for nid, _ in state.nodes}
        current = [scene.GetNthNode(i) for i in range(scene.GetNumberOfNodes())]
        for node in current:
            if node.GetID() not in keep and any(node.IsA(cls) for cls in DATA_CLASSES):
                scene.RemoveNode(node)
        for nid, node in state.nodes:
            if scene.GetNodeByID(nid) is None:
                scene.AddNode(node)
        self._volumes, self._segments, self._transforms = (
            dict(state.volumes),
            dict(state.segments),
            dict(state.transforms),
        )
        for name in VIEW_NAMES:
            m, fov, dims, orientation, mode, prescribed = state.slices[name]
            n = self.slice_node(name)
            modify = n.StartModify()
            n.SetOrientation(orientation)
            n.GetSliceToRAS().DeepCopy(vtk_matrix(m))
            n.SetFieldOfView(*fov)
            n.SetDimensions(*dims)
            n.SetSliceSpacingMode(mode)
            n.SetPrescribedSliceSpacing(*prescribed)
            n.UpdateMatrices()
            n.EndModify(modify)
            c = self.composite_node(name)
            bg, fg, opacity, compositing = state.composites[name]
            c.SetBackgroundVolumeID(bg)
            c.SetForegroundVolumeID(fg)
            c.SetForegroundOpacity(opacity)
            c.SetCompositing(compositing)
        for vid, (window, level, colour, auto, preset) in state.displays.items():
            d = self._display_node(vid)
            d.SetWindowLevel(window, level)
            d.SetAndObserveColorNodeID(colour)
            d.SetAttribute(AUTO_ATTR, auto)
            d.SetAttribute(PRESET_ATTR, preset)
        self.mrml.layout_node.SetViewArrangement(state.layout)
        self._shown_size = dict(state.extra.get("shown_size", {}))

    # ----- scene -----
    def add_volume(self, volume: Volume) -> str:
        """A scalar volume node with a display node; returns its node id. A volume file is read by Slicer's
        own reader (vtkMRMLVolumeArchetypeStorageNode); other volumes (DICOM series, derived volumes) are
        handed over as voxels and IJK→RAS."""
        node = self._own(self.scene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", volume.name))
        if not self._read_with_slicer(node, volume):
            node.SetAndObserveImageData(image_data(volume.data))
            node.SetIJKToRASMatrix(vtk_matrix(volume.ijk_to_ras))
        display = self.scene.AddNewNodeByClass("vtkMRMLScalarVolumeDisplayNode")
        display.SetAutoWindowLevel(0)  # the window is set below; Slicer's histogram would be computed for nothing
        node.SetAndObserveDisplayNodeID(display.GetID())
        vid = node.GetID()
        self._volumes[vid] = volume
        self._write_display(vid, default_display(volume))
        return vid

    def _read_with_slicer(self, node: Any, volume: Volume) -> bool:
        """Read the volume's source file with Slicer's archetype storage node; keep it only when Slicer's
        voxels and geometry are the ones the handlers computed with (else remove the storage node)."""
        source = Path(volume.source) if volume.source else None
        if source is None or not source.is_file() or not source.name.lower().endswith(VOLUME_SUFFIXES):
            return False
        storage = self.scene.AddNewNodeByClass("vtkMRMLVolumeArchetypeStorageNode")
        storage.SetFileName(str(source))
        same = bool(storage.ReadData(node)) and node.GetImageData() is not None
        if same:
            m = vtkMatrix4x4()
            node.GetIJKToRASMatrix(m)
            scalars = numpy_support.vtk_to_numpy(node.GetImageData().GetPointData().GetScalars())
            same = (
                tuple(node.GetImageData().GetDimensions()) == volume.dimensions
                and np.allclose(np_matrix(m), volume.ijk_to_ras, atol=1e-6)
                and np.array_equal(scalars.reshape(volume.data.shape), volume.data)
            )
        if same:
            node.SetAndObserveStorageNodeID(storage.GetID())
        else:
            self.scene.RemoveNode(storage)
        return same

    def adopt_volume_node(
        self, node: Any, modality: str = "MR", name: str | None = None, keep_display: bool = False
    ) -> str:
        """Take in a scalar volume node already in the scene (e.g. loaded by the user in Slicer). `name` is what
        handlers and the model call it (the node keeps its own); with `keep_display` the node's window/level
        and colours stay as the clinician set them."""
        m = vtkMatrix4x4()
        node.GetIJKToRASMatrix(m)
        k_j_i = tuple(reversed(node.GetImageData().GetDimensions()))
        data = numpy_support.vtk_to_numpy(node.GetImageData().GetPointData().GetScalars()).reshape(k_j_i)
        label = name or node.GetName()
        volume = Volume(label, data.astype(np.float32), np_matrix(m), modality, source=node.GetID())
        if node.GetDisplayNode() is None:
            node.CreateDefaultDisplayNodes()
        self._volumes[node.GetID()] = volume
        if not keep_display:
            self._write_display(node.GetID(), default_display(volume))
        return node.GetID()

    def volume_name_taken(self, name: str) -> bool:
        return any(v.name == name for v in self._volumes.values())

    def add_segment(self, segment: Segment) -> str:
        """A segmentation node holding the segment's label map (imported by Slicer's segmentations logic)."""
        rules.check_name_free(self._segments, segment.name, "segment")
        segment.colour = SEGMENT_COLOURS[len(self._segments) % len(SEGMENT_COLOURS)]
        labelmap = self.scene.AddNewNodeByClass("vtkMRMLLabelMapVolumeNode", f"{segment.name} label map")
        labelmap.SetAndObserveImageData(image_data((segment.mask.data > 0).astype(np.uint8)))
        labelmap.SetIJKToRASMatrix(vtk_matrix(segment.mask.ijk_to_ras))
        node = self._own(self.scene.AddNewNodeByClass("vtkMRMLSegmentationNode", segment.name))
        node.CreateDefaultDisplayNodes()
        mrml().vtkSlicerSegmentationsModuleLogic.ImportLabelmapToSegmentationNode(labelmap, node)
        self.scene.RemoveNode(labelmap)
        sid = node.GetID()
        self._segments[sid] = segment
        return sid

    def add_transform(self, node: TransformNode) -> str:
        """A linear transform node (moving → fixed, the direction Slicer applies to the moving volume)."""
        rules.check_name_free(self._transforms, node.name, "transform")
        mrml = self._own(self.scene.AddNewNodeByClass("vtkMRMLLinearTransformNode", node.name))
        mrml.SetMatrixTransformToParent(vtk_matrix(np.linalg.inv(node.matrix)))
        tid = mrml.GetID()
        self._transforms[tid] = node
        return tid

    def segment(self, ref: str) -> tuple[str, Segment]:
        return rules.lookup(self._segments, ref, "segment")

    def transform(self, ref: str) -> tuple[str, TransformNode]:
        return rules.lookup(self._transforms, ref, "transform")

    def clear(self) -> None:
        """Remove every node this viewer added (with display and storage nodes) and reset views and fusion;
        refused on an adopted scene (the clinician's nodes and views are never cleared)."""
        if self.adopted:
            from copilot.errors import HandlerError

            raise HandlerError("host_scene", "the clinician's scene is never cleared; open a case pack apart")
        for nid in [*self._volumes, *self._segments, *self._transforms]:
            node = self.scene.GetNodeByID(nid)
            if node is not None:
                self._remove(node)
        self._volumes.clear()
        self._segments.clear()
        self._transforms.clear()
        for name in VIEW_NAMES:
            self._reset_view(name)
            c = self.composite_node(name)
            c.SetBackgroundVolumeID(None)
            c.SetForegroundVolumeID(None)
            c.SetForegroundOpacity(0.0)
            c.SetCompositing(COMPOSITING["blend"])
        self.mrml.layout_node.SetViewArrangement(LAYOUT_IDS["three_up"])

    def volume(self, vid: str) -> Volume:
        return self._volumes[vid]

    def volume_ids(self) -> list[str]:
        return list(self._volumes)

    def resolve_volume(self, volume_id: str | None = None, volume_name: str | None = None) -> str:
        """Node id for an id or a name (exact, then case-insensitive); the background volume when neither."""
        return rules.resolve_volume(self._volumes, self.background, volume_id, volume_name)

    def inventory(self) -> list[dict[str, Any]]:
        """One entry per volume node, with the geometry Slicer holds for it."""
        out = []
        for vid, v in self._volumes.items():
            m = vtkMatrix4x4()
            self.volume_node(vid).GetIJKToRASMatrix(m)
            ijk_to_ras = np_matrix(m)
            out.append(
                {
                    "id": vid,
                    "name": v.name,
                    "modality": v.modality,
                    "dimensions": list(self.volume_node(vid).GetImageData().GetDimensions()),
                    "spacing_mm": [round(s, 6) for s in self.volume_node(vid).GetSpacing()],
                    "origin_ras": [round(float(x), 6) for x in ijk_to_ras[:3, 3]],
                    "ijk_to_ras": [[round(float(x), 6) for x in row] for row in ijk_to_ras],
                    "value_range": [round(x, 6) for x in v.value_range],
                    **inventory_facts(v),
                }
            )
        return out

    # ----- views -----
    def view(self, name: str) -> SliceView:
        """A read-only SliceView of the slice node (orientation, centre, field of view, dimensions)."""
        rules.check_view(name)
        n = self.slice_node(name)
        m = np_matrix(n.GetSliceToRAS())
        fov, dims = n.GetFieldOfView(), n.GetDimensions()
        orientation = n.GetOrientation().lower()
        if orientation not in ORIENTATION_MATRICES:  # reformatted in Slicer: named after the closest preset
            orientation = max(ORIENTATION_MATRICES, key=lambda o: abs(ORIENTATION_MATRICES[o][:, 2] @ m[:3, 2]))
        return SliceView(name, orientation, m[:3, 3].copy(), (fov[0], fov[1]), (dims[0], dims[1]))

    def _write_view(self, v: SliceView) -> None:
        """Write a SliceView's centre and field of view into its slice node (orientation unchanged)."""
        n = self.slice_node(v.name)
        modify = n.StartModify()
        n.GetSliceToRAS().SetElement(0, 3, float(v.center[0]))
        n.GetSliceToRAS().SetElement(1, 3, float(v.center[1]))
        n.GetSliceToRAS().SetElement(2, 3, float(v.center[2]))
        n.SetFieldOfView(float(v.fov[0]), float(v.fov[1]), n.GetFieldOfView()[2])
        n.UpdateMatrices()
        n.EndModify(modify)

    @property
    def layout(self) -> str:
        arrangement = self.mrml.layout_node.GetViewArrangement()
        return next((k for k, v in LAYOUT_IDS.items() if v == arrangement), "three_up")

    def layout_views(self) -> tuple[str, ...]:
        return rules.LAYOUTS[self.layout]

    def set_layout(self, layout: str) -> None:
        self.mrml.layout_node.SetViewArrangement(LAYOUT_IDS[rules.layout_name(layout)])

    def set_orientation(self, view: str, orientation: str) -> None:
        """Put a view in a standard orientation preset and fit it."""
        rules.check_view(view)
        rules.check_orientation(orientation)
        self.slice_node(view).SetOrientation(orientation.capitalize())
        self.fit(view)

    def _range_resolution(self, view: str) -> tuple[float, float, float]:
        """vtkMRMLSliceLogic::GetSliceOffsetRangeResolution (native offsets)."""
        self.resolve_volume()
        rng = [0.0, 0.0]
        res: Any = reference(1.0)
        self.slice_logic(view).GetSliceOffsetRangeResolution(rng, res)
        return rng[0], rng[1], float(res)

    def slice_offset_range(self, view: str) -> tuple[float, float]:
        """Slicer's slider range for the view, as canonical offsets."""
        rules.check_view(view)
        lo, hi, _ = self._range_resolution(view)
        return canonical_range(self.view(view).orientation, lo, hi)

    def slice_step(self, view: str) -> float:
        """Slicer's slider step (the prescribed spacing once open_case set one)."""
        rules.check_view(view)
        return self._range_resolution(view)[2]

    def set_slice_step(self, step: float | None) -> None:
        rules.check_slice_step(step)
        for name in VIEW_NAMES:
            n = self.slice_node(name)
            if step is None:
                n.SetSliceSpacingModeToAutomatic()
            else:
                n.SetPrescribedSliceSpacing(step, step, step)
                n.SetSliceSpacingModeToPrescribed()

    def check_offset(self, view: str, offset: float) -> None:
        """Raise unless `offset` lies inside the view's slice offset range."""
        rules.check_offset(view, offset, *self.slice_offset_range(view))

    def set_slice_offset(self, view: str, offset: float) -> None:
        """Set a canonical offset: Slicer's SetSliceOffset with the native sign."""
        self.check_offset(view, offset)
        self.slice_node(view).SetSliceOffset(native_offset(self.view(view).orientation, offset))

    def _reference(self) -> Volume:
        return self._volumes[self.resolve_volume()]

    def zoom(self, view: str, factor: float, anchor_ras: np.ndarray | None = None) -> None:
        """Zoom by `factor` about a RAS point fixed on screen (the slice node's field of view and centre)."""
        v = self.view(view)
        rules.check_zoom_factor(factor)
        rules.check_zoom_fov(factor, v.fov, self._reference().corners_ras())
        v.zoom(factor, anchor_ras)
        self._write_view(v)

    def fit(self, view: str) -> None:
        """vtkMRMLSliceLogic's fit (FitSliceToAll's rule, on the background volume) at the view's size; the
        slice offset is kept."""
        rules.check_view(view)
        background = self.volume_node(self.resolve_volume())
        node = self.slice_node(view)
        native = node.GetSliceOffset()
        w, h = node.GetDimensions()[:2]
        self.slice_logic(view).FitSliceToVolume(background, w, h)  # FitSliceToAll, background layer only
        node.SetSliceOffset(native)

    def recover_standard_views(self, vid: str | None = None) -> None:
        """Orientation presets, FitSliceToAll, each offset at the volume centre; `vid` becomes the background."""
        vid = vid or self.resolve_volume()
        self.select_volume(vid)
        centre = self._volumes[vid].center_ras()
        for name in VIEW_NAMES:
            node = self.slice_node(name)
            node.SetOrientation(VIEW_ORIENTATION[name].capitalize())
            w, h = node.GetDimensions()[:2]
            self.slice_logic(name).FitSliceToVolume(self.volume_node(vid), w, h)
            node.SetSliceOffset(float(np_matrix(node.GetSliceToRAS())[:3, 2] @ centre))

    def jump(self, ras: np.ndarray) -> None:
        """Centre every view on a RAS point (vtkMRMLSliceNode::JumpSliceByCentering)."""
        ras = rules.jump_point(ras)
        rules.check_inside(ras, self._reference().corners_ras())
        for name in VIEW_NAMES:
            self.slice_node(name).JumpSliceByCentering(float(ras[0]), float(ras[1]), float(ras[2]))

    # ----- display -----
    def display(self, vid: str) -> DisplaySettings:
        """The display node's window/level and colour node, with the project's auto/preset flags."""
        d = self._display_node(vid)
        colour = next((k for k, v in COLOR_NODE_IDS.items() if v == d.GetColorNodeID()), "grey")
        preset = d.GetAttribute(PRESET_ATTR) or None
        return DisplaySettings(d.GetWindow(), d.GetLevel(), d.GetAttribute(AUTO_ATTR) == "1", colour, preset)

    def _write_display(self, vid: str, s: DisplaySettings) -> None:
        d = self._display_node(vid)
        d.SetAutoWindowLevel(0)
        d.SetWindowLevel(float(s.window), float(s.level))
        d.SetAndObserveColorNodeID(COLOR_NODE_IDS[s.colormap])
        d.SetAttribute(AUTO_ATTR, "1" if s.auto else "0")
        d.SetAttribute(PRESET_ATTR, s.preset or "")

    def set_window_level(self, vid: str, window: float, level: float) -> None:
        rules.check_window_level(window, level)
        self._write_display(vid, DisplaySettings(float(window), float(level), False, self.display(vid).colormap))

    def set_auto_window_level(self, vid: str) -> None:
        """The project's robust-percentile auto window (the same numbers on every backend)."""
        w, lv = auto_window_level(self._volumes[vid])
        self._write_display(vid, DisplaySettings(w, lv, True, self.display(vid).colormap))

    def apply_preset(self, vid: str, preset: str) -> None:
        rules.check_preset(preset)
        self._write_display(vid, preset_settings(self._volumes[vid], preset))

    # ----- layers -----
    @property
    def background(self) -> str | None:
        return self.composite_node("red").GetBackgroundVolumeID()

    def peek(self, request: Peek) -> dict[str, Image.Image]:
        """Images of a `Peek` (the session puts the scene back afterwards)."""
        return peek_volumes(self, request)

    def geometry(self, view: str) -> SliceView:
        """A copy of a slice view's geometry as the slice node holds it, for a host's own conversions."""
        return copy.deepcopy(self.view(view))

    def scene_data(self) -> dict[str, Any]:
        """For a host's 3D view and value readout: the background volume, its display node's window/level, the
        segments and the foreground volume (or None); {} without a volume of this viewer's as the background."""
        vid = self.background
        if vid is None or vid not in self._volumes:
            return {}
        d, segments = self.display(vid), list(self._segments.values())
        fg = self.composite_node("red").GetForegroundVolumeID()
        return {"volume": self._volumes[vid], "window": d.window, "level": d.level, "segments": segments,
                "foreground": self._volumes.get(fg) if fg else None}  # fmt: skip

    def select_volume(self, vid: str) -> None:
        """The background of every composite node (the active volume)."""
        self.resolve_volume(volume_id=vid)
        for name in VIEW_NAMES:
            c = self.composite_node(name)
            c.SetBackgroundVolumeID(vid)
            if c.GetForegroundVolumeID() == vid:
                c.SetForegroundVolumeID(None)
                c.SetForegroundOpacity(0.0)

    def set_fusion(self, bg: str, fg: str | None, opacity: float, mode: str = "blend") -> None:
        rules.check_fusion(bg, fg, opacity, mode)
        for name in VIEW_NAMES:
            c = self.composite_node(name)
            c.SetBackgroundVolumeID(bg)
            c.SetForegroundVolumeID(fg)
            c.SetForegroundOpacity(float(opacity) if fg is not None else 0.0)
            c.SetCompositing(COMPOSITING[mode])

    # ----- rendering and conversions -----
    def _pipeline_image(self, view: str, size: tuple[int, int], grey: bool = False) -> np.ndarray:
        """RGB (H, W, 3), or its red channel (H, W) when `grey`, of the slice logic's RGBA output over black at
        `size`, the field of view fitted inside it. The pipeline stays as Slicer built it: only the stages
        whose input changed since the last call run again, and the output is read in place."""
        node = self.slice_node(view)
        w, h = size
        fov, dims = node.GetFieldOfView(), node.GetDimensions()
        s = max(fov[0] / w, fov[1] / h)
        resize = tuple(dims) != (w, h, 1) or (fov[0], fov[1]) != (s * w, s * h)
        if resize:  # a size other than the node's: set for this image, put back after
            modify = node.StartModify()
            node.SetDimensions(w, h, 1)
            node.SetFieldOfView(s * w, s * h, fov[2])
            node.UpdateMatrices()
            node.EndModify(modify)
        try:
            producer = self.slice_logic(view).GetImageDataConnection().GetProducer()
            producer.Update()
            out = producer.GetOutputDataObject(0)
            rgba = numpy_support.vtk_to_numpy(out.GetPointData().GetScalars()).reshape(h, w, -1)[::-1]  # top first
            return over_black(rgba, 1 if grey else 3)  # as Slicer's view draws it
        finally:
            if resize:
                modify = node.StartModify()
                node.SetFieldOfView(*fov)
                node.SetDimensions(*dims)
                node.UpdateMatrices()
                node.EndModify(modify)

    def render(self, view: str, size: tuple[int, int], remember: bool = True) -> Image.Image:
        """The slice logic's image with corner annotations and segment outlines; remembers the size in the
        slice node's dimensions."""
        v = self.view(view)
        size = (int(size[0]), int(size[1]))
        bg = self.background
        fg = self.composite_node(view).GetForegroundVolumeID()
        grey = (fg is None or self.composite_node(view).GetForegroundOpacity() == 0.0) and (
            bg is None or self.display(bg).colormap == "grey"
        )
        pixels = self._pipeline_image(view, size, grey)
        image = Image.fromarray(pixels)
        if self._segments:
            rgb = np.array(image.convert("RGB"))
            m = v.image_to_ras_matrix(size)
            for seg in self._segments.values():
                rgb[outline(seg, m, size)] = seg.colour
            image = Image.fromarray(rgb)
        background = (self._volumes[bg].name, self.display(bg)) if bg else None
        fg_name = self._volumes[fg].name if fg else None
        draw_corners(image, corner_text(v, background, fg_name, self.composite_node(view).GetForegroundOpacity()))
        if remember and self.adopted:
            self._shown_size[view] = size
        elif remember:
            node = self.slice_node(view)
            node.SetDimensions(size[0], size[1], 1)
        return image

    def point_to_ras(self, view: str, point_1000: tuple[float, float]) -> np.ndarray:
        """RAS of a 0–999 point on the last image: the slice node's XYToRAS at that pixel position."""
        node = self.slice_node(view)
        w, h = self._shown_size.get(view) or node.GetDimensions()[:2]
        fov = node.GetFieldOfView()
        s = max(fov[0] / w, fov[1] / h)
        x = point_1000[0] * (w - 1) / 999.0  # Slicer XY: pixel index, origin bottom-left
        y = (h - 1) - point_1000[1] * (h - 1) / 999.0
        xy_to_slice = np.array([[s, 0, 0, -s * w / 2], [0, s, 0, -s * h / 2], [0, 0, 1, 0], [0, 0, 0, 1.0]])
        return (np_matrix(node.GetSliceToRAS()) @ xy_to_slice @ np.array([x, y, 0.0, 1.0]))[:3]

    def show_evidence(self, evidence: list[dict[str, Any]], extra: Any = None, session_id: str = "") -> EvidenceMarkups:
        """Show a session's evidence list (and the items `extra()` gives, e.g. points an answer cites) as markups,
        brought up to date whenever the state is read."""
        self._markups = EvidenceMarkups(self.scene, evidence, extra, session_id)
        return self._markups

    def evidence_markups(self) -> EvidenceMarkups:
        """The markups that show the session's evidence (`show_evidence` made them)."""
        if self._markups is None:
            raise RuntimeError("no evidence is shown on this scene")
        return self._markups

    def stop_showing_evidence(self) -> None:
        """Leave the evidence markups as they are, no longer kept up to date (the session has ended)."""
        self._markups = None

    def state(self) -> dict[str, Any]:
        """JSON-ready snapshot read from the scene: layers, layout, views, display nodes, derived nodes. The
        session reads it after every call, so the evidence markups are brought up to date here."""
        if self._markups is not None:
            self._markups.sync()
        bg = self.background
        c = self.composite_node("red")
        fg = c.GetForegroundVolumeID()

        def name(vid: str | None) -> str | None:
            return self._volumes[vid].name if vid else None

        prescribed = self.slice_node("red").GetSliceSpacingMode() == 1
        compositing = c.GetCompositing()
        return {
            "active_volume": bg,
            "active_volume_name": name(bg),
            "background_volume": bg,
            "foreground_volume": fg,
            "foreground_volume_name": name(fg),
            "foreground_opacity": round(c.GetForegroundOpacity() if fg else 0.0, 6),
            "fusion_mode": next((k for k, v in COMPOSITING.items() if v == compositing), "blend"),
            "layout": self.layout,
            "slice_step_mm": self.slice_node("red").GetPrescribedSliceSpacing()[2] if prescribed else None,
            "views": {n: self.view(n).snapshot() for n in VIEW_NAMES},
            "display": {vid: self.display(vid).snapshot() for vid in self._volumes},
            "volumes": [{"id": vid, "name": v.name} for vid, v in self._volumes.items()],
            "segments": [
                {"id": sid, "name": sg.name, "source": sg.source, "voxels": sg.voxels()}
                for sid, sg in self._segments.items()
            ],
            "transforms": [{"id": tid, **t.snapshot()} for tid, t in self._transforms.items()],
        }
