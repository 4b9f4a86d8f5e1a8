"""A standalone Slicer scene on slicer-core: MRML scene, application logic, colours, orientation presets,
a layout node and one vtkMRMLSliceLogic per Red/Yellow/Green view (what Slicer's application sets up
before any view exists; trame-slicer, Kitware, sets its scene up the same way)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vtkmodules.vtkCommonCore import vtkCollection

from copilot.slicer_backend.mrml import mrml

LAYOUT_NAMES = {"red": "Red", "yellow": "Yellow", "green": "Green"}
DEFAULT_ORIENTATION = {"red": "Axial", "yellow": "Sagittal", "green": "Coronal"}


@dataclass
class SlicerScene:
    """A scene, its application logic and the three slice logics the viewer draws with."""

    scene: Any
    app_logic: Any
    slice_logics: dict[str, Any]
    layout_node: Any
    layout_logic: Any = None


def standalone_scene() -> SlicerScene:
    """A fresh scene with its own application logic and Red/Yellow/Green slice logics."""
    sc = mrml()
    scene = sc.vtkMRMLScene()
    app = sc.vtkSlicerApplicationLogic()
    app.SetMRMLScene(scene)
    app.GetColorLogic().SetMRMLScene(scene)
    app.GetColorLogic().AddDefaultColorNodes()
    app.SetSliceLogics(vtkCollection())
    app.SetViewLogics(vtkCollection())
    sc.vtkMRMLSliceNode.AddDefaultSliceOrientationPresets(scene, True)
    layout_logic = sc.vtkMRMLLayoutLogic()  # Slicer's layouts; it makes the layout's view and slice nodes
    layout_logic.SetMRMLScene(scene)
    layout_logic.GetLayoutNode().SetViewArrangement(sc.vtkMRMLLayoutNode.SlicerLayoutFourUpView)
    out = attach(scene, app)
    out.layout_logic = layout_logic
    return out


def attach(scene: Any, app_logic: Any, adopt: bool = False) -> SlicerScene:
    """The slice logics of an existing scene (the application's layout logics when they exist, new ones
    otherwise, e.g. with `--no-main-window`) and its layout node. With `adopt` an existing slice node keeps
    the orientation the clinician gave it."""
    sc = mrml()
    if scene.GetDefaultNodeByClass("vtkMRMLSliceNode") is None:  # a bare scene: Slicer 5's presets first
        sc.vtkMRMLSliceNode.AddDefaultSliceOrientationPresets(scene, True)
    logics: dict[str, Any] = {}
    for view, layout_name in LAYOUT_NAMES.items():
        logic = app_logic.GetSliceLogicByLayoutName(layout_name) if app_logic is not None else None
        if logic is None:
            logic = sc.vtkMRMLSliceLogic()
            if app_logic is not None:
                logic.SetMRMLApplicationLogic(app_logic)
                if app_logic.GetSliceLogics() is None:
                    app_logic.SetSliceLogics(vtkCollection())
                app_logic.GetSliceLogics().AddItem(logic)
            logic.SetMRMLScene(scene)
            existing = scene.GetNodeByID(f"vtkMRMLSliceNode{layout_name}")  # the layout's slice node
            if existing is not None:
                logic.SetSliceNode(existing)
            else:
                logic.AddSliceNode(layout_name)
            if existing is None or not adopt:
                logic.GetSliceNode().SetOrientation(DEFAULT_ORIENTATION[view])
        logics[view] = logic
    layout_logic = None
    if scene.GetFirstNodeByClass("vtkMRMLLayoutNode") is None:
        layout_logic = sc.vtkMRMLLayoutLogic()
        layout_logic.SetMRMLScene(scene)
    return SlicerScene(scene, app_logic, logics, scene.GetFirstNodeByClass("vtkMRMLLayoutNode"), layout_logic)
