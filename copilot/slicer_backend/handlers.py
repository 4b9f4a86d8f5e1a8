"""What serves each radiology handler on the `slicer` backend: Slicer's own libraries, partly Slicer, or the
project's code (where slicer-core has no equivalent). The README's handler list is checked against this."""

from __future__ import annotations

SLICER, PARTLY, PROJECT = "Slicer", "partly", "project"

# handler: (who serves it, the Slicer API or the project code that does the work)
HANDLER_IMPLEMENTATION: dict[str, tuple[str, str]] = {
    "ping": (PROJECT, "no scene access"),
    "open_case": (
        PARTLY,
        "volume files: vtkMRMLVolumeArchetypeStorageNode.ReadData; DICOM series: the project's loader "
        "(Slicer's DICOM module is a Qt module, not in slicer-core), handed over as voxels",
    ),
    "select_volume": (SLICER, "vtkMRMLSliceCompositeNode.SetBackgroundVolumeID"),
    "observe": (SLICER, "vtkMRMLSliceLogic image pipeline; corner text drawn by the project"),
    "scroll": (SLICER, "vtkMRMLSliceNode.SetSliceOffset, step from GetSliceOffsetRangeResolution; cine APNG: project"),
    "zoom": (SLICER, "vtkMRMLSliceNode.SetFieldOfView and SliceToRAS centre (anchor kept on screen)"),
    "fit": (SLICER, "vtkMRMLSliceLogic.FitSliceToAll (slice offset kept)"),
    "set_slice_offset": (SLICER, "vtkMRMLSliceNode.SetSliceOffset (native sign)"),
    "get_slice_offset_range": (SLICER, "vtkMRMLSliceLogic.GetSliceOffsetRangeResolution"),
    "recover_standard_views": (SLICER, "vtkMRMLSliceNode.SetOrientation presets, FitSliceToAll, SetSliceOffset"),
    "image_coords_to_ras": (SLICER, "vtkMRMLSliceNode SliceToRAS / XYToRAS"),
    "get_viewer_state": (SLICER, "read from slice, composite, display, layout and data nodes"),
    "wl": (
        PARTLY,
        "vtkMRMLScalarVolumeDisplayNode.SetWindowLevel; auto W/L is the project's percentile rule "
        "(the same numbers on both backends)",
    ),
    "window_preset": (
        PARTLY,
        "display node W/L and colour node (Grey, PET-Heat); CT values are Slicer's presets, MR/PET auto "
        "presets the project's percentiles",
    ),
    "jump": (SLICER, "vtkMRMLSliceNode.JumpSliceByCentering"),
    "set_layout": (SLICER, "vtkMRMLLayoutNode.SetViewArrangement"),
    "fusion": (SLICER, "vtkMRMLSliceCompositeNode foreground, opacity, compositing"),
    "bookmark_view": (SLICER, "slice logic image; the evidence list is the project's"),
    "record_key_slice": (SLICER, "slice node offset; the evidence list is the project's"),
    "record_point": (SLICER, "XYToRAS; shown as a vtkMRMLMarkupsFiducialNode control point"),
    "measure_distance": (SLICER, "XYToRAS; shown as a vtkMRMLMarkupsLineNode"),
    "probe_value": (PROJECT, "the voxel nearest the point in the volume node's array (IJKToRAS), in HU or SUV"),
    "region_stats": (PROJECT, "the voxels of the volume node's array inside the sphere, box or segment"),
    "record_measurement": (PROJECT, "probe_value's or region_stats' numbers kept as evidence"),
    "measure_bidirectional": (PROJECT, "two perpendicular lines (RAS); the evidence list is the project's"),
    "measure_angle": (PROJECT, "three points (RAS); the evidence list is the project's"),
    "measure_ellipse": (PROJECT, "the voxels of the volume node's array inside the ellipse on its plane"),
    "register_volumes": (
        PROJECT,
        "SimpleITK registration (Slicer's BRAINSFit is a CLI module outside slicer-core); the result is a "
        "vtkMRMLLinearTransformNode; verification views drawn by the embedded renderer",
    ),
    "apply_transform": (PROJECT, "SimpleITK resampling; the result is a new scalar volume node"),
    "resample_volume": (PROJECT, "SimpleITK resampling; the result is a new scalar volume node"),
    "segment_threshold": (
        PARTLY,
        "mask by the project; stored with vtkSlicerSegmentationsModuleLogic.ImportLabelmapToSegmentationNode; "
        "outlines drawn by the project",
    ),
    "segment_grow_from_seeds": (
        PARTLY,
        "region growing by SimpleITK; stored as a vtkMRMLSegmentationNode; outlines drawn by the project",
    ),
    "segment_statistics": (PROJECT, "statistics of the segment's label map"),
    "vista3d_segment": (PARTLY, "MONAI VISTA3D inference; stored as a vtkMRMLSegmentationNode"),
    "import_dicom": (PROJECT, "the project's DICOM loader; the result is a new scalar volume node"),
    "export_dicom_seg": (PROJECT, "highdicom"),
    "export_evidence_sr": (PROJECT, "highdicom (TID 1500 measurement report)"),
    "export_key_images": (PROJECT, "highdicom (Key Object Selection, TID 2000)"),
    "export_response_sr": (PROJECT, "highdicom (TID 1500 report of RECIST 1.1 / RANO 2.0 lesions and response)"),
}
