"""Slicer-independent facts the Slicer backend relies on (importable without Slicer, so tested here).

Sources (Slicer 5.10): layout ids from `vtkMRMLLayoutNode` (`SlicerLayoutFourUpView` = 3,
`SlicerLayoutOneUpRedSliceView` = 6, `SlicerLayoutOneUpYellowSliceView` = 7,
`SlicerLayoutOneUpGreenSliceView` = 8); slice node names Red/Yellow/Green; PET colour node id from
`vtkMRMLPETProceduralColorNode` ("PET-Heat"); the grey colour table id used by scalar volume display
nodes. See docs/slicer.md for every API with its source location.
"""

from __future__ import annotations

LAYOUT_IDS = {"three_up": 3, "one_up_red": 6, "one_up_yellow": 7, "one_up_green": 8}
SLICE_NODE_NAMES = {"red": "Red", "yellow": "Yellow", "green": "Green"}
COLOR_NODE_IDS = {"grey": "vtkMRMLColorTableNodeGrey", "pet_heat": "vtkMRMLPETProceduralColorNodePET-Heat"}
FUSION_COMPOSITING = {"blend": 0, "add": 2}  # vtkMRMLSliceCompositeNode::Alpha, ::Add

# Each radiology handler and the Slicer API the backend uses for it (kept in step with the registry
# by a test; details and source locations in docs/slicer.md).
HANDLER_IMPLEMENTATION = {
    "ping": "WebServer reachability (no scene change)",
    "open_case": "slicer.util.loadVolume / DICOMUtils; SlicerViewer.add_volume",
    "select_volume": "vtkMRMLSliceCompositeNode.SetBackgroundVolumeID",
    "observe": "SlicerViewer.render (arrayFromVolume + IJKToRAS, engine renderer)",
    "scroll": "vtkMRMLSliceNode.GetSliceToRAS / UpdateMatrices",
    "zoom": "vtkMRMLSliceNode.SetFieldOfView",
    "fit": "vtkMRMLSliceNode.SetFieldOfView + SliceToRAS centre",
    "set_slice_offset": "vtkMRMLSliceNode.GetSliceToRAS / UpdateMatrices",
    "get_slice_offset_range": "vtkMRMLScalarVolumeNode.GetIJKToRASMatrix (corner voxels)",
    "recover_standard_views": "vtkMRMLSliceNode.SetOrientationToAxial/Sagittal/Coronal-equivalent SliceToRAS",
    "image_coords_to_ras": "SliceToRAS + FieldOfView of the rendered image",
    "get_viewer_state": "slice, composite and display nodes",
    "wl": "vtkMRMLScalarVolumeDisplayNode.SetAutoWindowLevel(0) + SetWindowLevel",
    "window_preset": "vtkMRMLScalarVolumeDisplayNode.SetWindowLevel + SetAndObserveColorNodeID",
    "jump": "vtkMRMLSliceNode.JumpSliceByCentering (all slice nodes)",
    "set_layout": "slicer.app.layoutManager().setLayout",
    "fusion": "vtkMRMLSliceCompositeNode.SetForegroundVolumeID / SetForegroundOpacity / SetCompositing",
    "bookmark_view": "SlicerViewer.render; evidence list",
    "record_key_slice": "slice node offset; evidence list",
    "record_point": "vtkMRMLMarkupsFiducialNode.AddControlPoint",
    "measure_distance": "vtkMRMLMarkupsLineNode.AddControlPoint (2 points)",
    "register_volumes": "SimpleITK registration + vtkMRMLLinearTransformNode.SetMatrixTransformToParent",
    "apply_transform": "new vtkMRMLScalarVolumeNode (slicer.util.updateVolumeFromArray)",
    "resample_volume": "new vtkMRMLScalarVolumeNode (slicer.util.updateVolumeFromArray)",
    "segment_threshold": "vtkMRMLLabelMapVolumeNode (slicer.util.updateVolumeFromArray)",
    "segment_grow_from_seeds": "vtkMRMLLabelMapVolumeNode (slicer.util.updateVolumeFromArray)",
    "segment_statistics": "label map arrays (slicer.util.arrayFromVolume)",
    "vista3d_segment": "MONAI in Slicer's Python (slicer.util.pip_install) + vtkMRMLLabelMapVolumeNode",
    "import_dicom": "DICOM series loaded with the core loader, then SlicerViewer.add_volume",
    "export_dicom_seg": "highdicom in Slicer's Python (slicer.util.pip_install)",
}

# Python packages the module installs into Slicer's Python (slicer.util.pip_install), core first.
PIP_REQUIREMENTS = ("medcopilot", "pydantic>=2.6", "SimpleITK>=2.3", "pydicom>=2.4", "highdicom>=0.22")
