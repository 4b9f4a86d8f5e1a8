"""Adopting the clinician's own Slicer scene: which volume nodes a session takes in, what the model may call
them (never an identifier from their DICOM attributes), and the record that lets a trace replay on a fresh
scene.

Slicer's DICOM browser keeps a loaded series' facts in the subject hierarchy: the series item carries
`DICOM.Modality` and `DICOM.SeriesNumber`, its parents (study, patient) carry the study and patient
attributes (`DICOM.PatientName`, `DICOM.PatientID`, `DICOM.StudyDate`, ...) and are named after them, and the
items carry their UIDs under the "DICOM" UID name (vtkMRMLSubjectHierarchyConstants; Slicer's
DICOMScalarVolumePlugin also sets the node attribute `DICOM.instanceUIDs`). Only modality and series
number reach the model; every other value is an identifier that no name sent to the model may contain.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from vtkmodules.util import numpy_support
from vtkmodules.vtkCommonMath import vtkMatrix4x4

from copilot.engine.geometry import VIEW_NAMES
from copilot.privatefs import make_private, private_dir
from copilot.slicer_backend.scene import standalone_scene
from copilot.slicer_backend.viewer import OWNER_ATTR, SlicerSceneViewer, image_data, np_matrix, vtk_matrix

MODALITY_ATTR, SERIES_NUMBER_ATTR, DICOM_UID_NAME = "DICOM.Modality", "DICOM.SeriesNumber", "DICOM"
MODEL_FACTS = (MODALITY_ATTR, SERIES_NUMBER_ATTR)  # the only DICOM attributes a model may see
ADOPTED_EVENT = "scene_adopted"  # the trace event recording the adopted scene (replay starts from it)
ADOPTED_DIR = "adopted"  # the trace's copy of the adopted voxels (no header, so no identifiers)


@dataclass
class SceneVolume:
    """A volume node of the clinician's scene as the copilot knows it."""

    node_id: str
    name: str  # what handlers and the model call it
    modality: str
    series_number: str | None
    from_dicom: bool
    identifiers: set[str] = field(default_factory=set)  # values that must never reach the model


def _sh(scene: Any) -> Any:
    return scene.GetSubjectHierarchyNode() if hasattr(scene, "GetSubjectHierarchyNode") else None


def _item_facts(sh: Any, item: int) -> tuple[dict[str, str], set[str]]:
    """DICOM attributes of a series item and the identifying values of it and its parents."""
    facts: dict[str, str] = {}
    identifiers: set[str] = set()
    level = 0
    while item and item != sh.GetSceneItemID():
        for name in sh.GetItemAttributeNames(item):
            value = sh.GetItemAttribute(item, name) or ""
            if level == 0 and name in MODEL_FACTS:
                facts[name] = value
            elif name.startswith("DICOM") and value:
                identifiers.add(value)
        uid = sh.GetItemUID(item, DICOM_UID_NAME)
        if uid:
            identifiers.add(uid)
        if level > 0 and sh.GetItemName(item):  # patient and study items are named after the patient and study
            identifiers.add(sh.GetItemName(item))
        item, level = sh.GetItemParent(item), level + 1
    return facts, identifiers


def dicom_attributes(scene: Any, node_id: str) -> dict[str, str]:
    """The DICOM attributes Slicer's DICOM import filed for a volume node's series, study and patient (subject
    hierarchy items, the nearest level first), by keyword: for the clinician's patient banner only."""
    sh = _sh(scene)
    node = scene.GetNodeByID(node_id)
    item = sh.GetItemByDataNode(node) if sh is not None and node is not None else 0
    found: dict[str, str] = {}
    while item and item != sh.GetSceneItemID():
        for name in sh.GetItemAttributeNames(item):
            value = sh.GetItemAttribute(item, name) or ""
            if name.startswith("DICOM.") and value:
                found.setdefault(name.removeprefix("DICOM."), value)
        item = sh.GetItemParent(item)
    return found


def _tokens(identifiers: set[str]) -> set[str]:
    """Words of the identifying values, to catch a name that repeats part of one (e.g. a family name)."""
    out: set[str] = set()
    for value in identifiers:
        out.add(value.lower())
        out.update(t.lower() for t in re.split(r"[\^\s,()/]+", value) if len(t) >= 3)
    return out


def mentions(text: str, identifiers: set[str]) -> bool:
    """Whether a text contains an identifying value or a word of one."""
    low = text.lower()
    return any(t and t in low for t in _tokens(identifiers))


def _scalar_volume_nodes(scene: Any) -> list[Any]:
    count = scene.GetNumberOfNodesByClass("vtkMRMLScalarVolumeNode")
    return [scene.GetNthNodeByClass(i, "vtkMRMLScalarVolumeNode") for i in range(count)]


def why_not_adopted(node: Any) -> str | None:
    """Why a scalar volume node of the scene is not taken in (None: it is)."""
    if node.IsA("vtkMRMLLabelMapVolumeNode"):
        return "a label map"
    if node.GetAttribute(OWNER_ATTR) == "1":
        return "made by the copilot"
    image = node.GetImageData()
    if image is None:
        return "no voxels"
    if image.GetNumberOfScalarComponents() != 1:
        return "not a scalar (single-component) volume"
    if node.GetParentTransformNode() is not None:
        return "under a transform (the copilot's coordinates would not be the ones Slicer shows)"
    return None


def skipped_volumes(scene: Any) -> list[tuple[str, str]]:
    """(node name, reason) of the clinician's volume nodes a session leaves out (shown in the panel only)."""
    out = []
    for node in _scalar_volume_nodes(scene):
        reason = why_not_adopted(node)
        if reason is not None and reason not in ("a label map", "made by the copilot"):
            out.append((node.GetName() or node.GetID(), reason))
    return out


def _modality(node: Any, facts: dict[str, str]) -> str:
    """The series' DICOM modality; without one, CT when the voxels reach below −500 (air in Hounsfield units),
    else MR."""
    if facts.get(MODALITY_ATTR):
        return facts[MODALITY_ATTR]
    low = node.GetImageData().GetScalarRange()[0]
    return "CT" if low < -500 else "MR"


def scene_volumes(scene: Any) -> list[SceneVolume]:
    """The clinician's scalar volumes (label maps, the copilot's own nodes and volumes it cannot take in left
    out), each with a name the model may see: the node's name unless it repeats an identifier of any volume in
    the scene; otherwise, for a DICOM series, "MR series 3"."""
    sh = _sh(scene)
    found = []
    for node in _scalar_volume_nodes(scene):
        if why_not_adopted(node) is not None:
            continue
        item = sh.GetItemByDataNode(node) if sh is not None else 0
        facts, identifiers = _item_facts(sh, item) if item else ({}, set())
        for attr in node.GetAttributeNames() or ():
            if attr.startswith("DICOM") and node.GetAttribute(attr):
                identifiers.add(node.GetAttribute(attr))
        found.append((node, facts, identifiers))
    every = set().union(*(ids for _, _, ids in found)) if found else set()
    out: list[SceneVolume] = []
    taken: set[str] = set()
    for n, (node, facts, identifiers) in enumerate(found):
        modality = _modality(node, facts)
        number = facts.get(SERIES_NUMBER_ATTR) or None
        name = node.GetName() or ""
        if not name or mentions(name, every):
            name = f"{modality} series {number}" if number else f"{modality} volume {n + 1}"
        base, k = name, 2
        while name in taken:
            name, k = f"{base} ({k})", k + 1
        taken.add(name)
        out.append(SceneVolume(node.GetID(), name, modality, number, bool(identifiers or facts), identifiers))
    return out


# ----- the record a replay starts from -----
def _slices(viewer: SlicerSceneViewer) -> dict[str, Any]:
    out = {}
    for view in VIEW_NAMES:
        n, c = viewer.slice_node(view), viewer.composite_node(view)
        out[view] = {
            "orientation": n.GetOrientation(),
            "slice_to_ras": np_matrix(n.GetSliceToRAS()).tolist(),
            "fov": list(n.GetFieldOfView()),
            "dimensions": list(n.GetDimensions()),
            "spacing_mode": n.GetSliceSpacingMode(),
            "prescribed_spacing": list(n.GetPrescribedSliceSpacing()),
            "background": c.GetBackgroundVolumeID(),
            "foreground": c.GetForegroundVolumeID(),
            "foreground_opacity": c.GetForegroundOpacity(),
            "compositing": c.GetCompositing(),
        }
    return out


def _write_nrrd(array: np.ndarray, path: Path) -> str:
    """Voxels only (geometry is in the record): a raw NRRD written by SimpleITK; its sha256."""
    import SimpleITK as sitk

    private_dir(path.parent)  # the clinician's voxels: owner-only, whatever the umask
    if os.path.lexists(path):  # a new file in a folder only this user can write: nothing there may be followed
        raise FileExistsError(f"{path} exists already; the adopted voxels are written to a new file only")
    sitk.WriteImage(sitk.GetImageFromArray(np.ascontiguousarray(array)), str(path), True)
    make_private(path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def adoption_record(viewer: SlicerSceneViewer, volumes: list[SceneVolume], trace_dir: Path | None) -> dict[str, Any]:
    """What the session starts from: each adopted volume (model name, modality, geometry, display; its voxels
    copied into the trace folder), the slice and composite nodes and the layout."""
    items = []
    for n, v in enumerate(volumes):
        node = viewer.volume_node(v.node_id)
        m = vtkMatrix4x4()
        node.GetIJKToRASMatrix(m)
        d = node.GetDisplayNode()
        item: dict[str, Any] = {
            "id": v.node_id,
            "name": v.name,
            "modality": v.modality,
            "ijk_to_ras": np_matrix(m).tolist(),
            "display": {
                "window": d.GetWindow(),
                "level": d.GetLevel(),
                "color_node": d.GetColorNodeID(),
                "auto": d.GetAutoWindowLevel(),
            },
        }
        if trace_dir is not None:
            k_j_i = tuple(reversed(node.GetImageData().GetDimensions()))
            voxels = numpy_support.vtk_to_numpy(node.GetImageData().GetPointData().GetScalars()).reshape(k_j_i)
            rel = f"{ADOPTED_DIR}/volume{n + 1}.nrrd"
            item["voxels"], item["sha256"] = rel, _write_nrrd(voxels, trace_dir / rel)
        items.append(item)
    return {"volumes": items, "slices": _slices(viewer), "layout": viewer.mrml.layout_node.GetViewArrangement()}


def replay_viewer(record: dict[str, Any], trace_dir: Path) -> SlicerSceneViewer:
    """A fresh standalone scene set up as the recorded adopted scene (same node ids, voxels, geometry, display,
    slice nodes and layout), adopted the same way: the trace's calls then replay on it."""
    import SimpleITK as sitk

    fresh = standalone_scene()
    scene = fresh.scene
    for item in record["volumes"]:
        path = trace_dir / item["voxels"]
        if hashlib.sha256(path.read_bytes()).hexdigest() != item["sha256"]:
            raise ValueError(f"{item['voxels']} was modified after the session")
        node = scene.AddNewNodeByClassWithID("vtkMRMLScalarVolumeNode", item["name"], item["id"])
        node.SetAndObserveImageData(image_data(sitk.GetArrayFromImage(sitk.ReadImage(str(path)))))
        node.SetIJKToRASMatrix(vtk_matrix(np.asarray(item["ijk_to_ras"])))
        display = scene.AddNewNodeByClass("vtkMRMLScalarVolumeDisplayNode")
        d = item["display"]
        display.SetAutoWindowLevel(d["auto"])
        display.SetWindowLevel(d["window"], d["level"])
        display.SetAndObserveColorNodeID(d["color_node"])
        node.SetAndObserveDisplayNodeID(display.GetID())
    for view, s in record["slices"].items():
        logic = fresh.slice_logics[view]
        n, c = logic.GetSliceNode(), logic.GetSliceCompositeNode()
        modify = n.StartModify()
        n.SetOrientation(s["orientation"])
        n.GetSliceToRAS().DeepCopy(vtk_matrix(np.asarray(s["slice_to_ras"])))
        n.SetFieldOfView(*s["fov"])
        n.SetDimensions(*s["dimensions"])
        n.SetSliceSpacingMode(s["spacing_mode"])
        n.SetPrescribedSliceSpacing(*s["prescribed_spacing"])
        n.UpdateMatrices()
        n.EndModify(modify)
        c.SetBackgroundVolumeID(s["background"])
        c.SetForegroundVolumeID(s["foreground"])
        c.SetForegroundOpacity(s["foreground_opacity"])
        c.SetCompositing(s["compositing"])
    fresh.layout_node.SetViewArrangement(record["layout"])
    viewer = SlicerSceneViewer(scene, fresh.app_logic, adopt=True)
    viewer.mrml.layout_logic = fresh.layout_logic  # kept alive with the viewer
    for item in record["volumes"]:
        viewer.adopt_volume_node(scene.GetNodeByID(item["id"]), item["modality"], item["name"], keep_display=True)
    return viewer
