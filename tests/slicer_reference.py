"""Slicer's own answers for one volume, straight from slicer-core (no project code in between): a scene with
the volume node, one vtkMRMLSliceLogic, Slicer 5's orientation presets, FitSliceToAll, the slider range and
step, XYToRAS, and the pixels of the slice logic's reslice pipeline at a given window/level."""

from __future__ import annotations

from typing import Any

import numpy as np

from copilot.engine.volume.image import Volume


class SlicerReference:
    """One volume shown in one slice view of a bare slicer-core scene."""

    def __init__(self, volume: Volume, window: float, level: float) -> None:
        import slicer_core as sc
        from vtkmodules.util import numpy_support
        from vtkmodules.vtkCommonCore import vtkCollection
        from vtkmodules.vtkCommonDataModel import vtkImageData
        from vtkmodules.vtkCommonMath import vtkMatrix4x4

        self.sc, self.numpy_support = sc, numpy_support
        self.scene = sc.vtkMRMLScene()
        self.app = app = sc.vtkSlicerApplicationLogic()  # kept: the logics point to it
        app.SetMRMLScene(self.scene)
        app.GetColorLogic().SetMRMLScene(self.scene)
        app.GetColorLogic().AddDefaultColorNodes()
        app.SetSliceLogics(vtkCollection())
        app.SetViewLogics(vtkCollection())
        sc.vtkMRMLSliceNode.AddDefaultSliceOrientationPresets(self.scene, True)
        self.logic = sc.vtkMRMLSliceLogic()
        self.logic.SetMRMLApplicationLogic(app)
        self.logic.SetMRMLScene(self.scene)
        self.node = self.logic.AddSliceNode("Red")
        k, j, i = volume.data.shape
        img = vtkImageData()
        img.SetDimensions(i, j, k)
        img.GetPointData().SetScalars(numpy_support.numpy_to_vtk(volume.data.ravel(), deep=True))
        vol = self.scene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", volume.name)
        vol.SetAndObserveImageData(img)
        m = vtkMatrix4x4()
        for r in range(4):
            for c in range(4):
                m.SetElement(r, c, float(volume.ijk_to_ras[r, c]))
        vol.SetIJKToRASMatrix(m)
        vol.CreateDefaultDisplayNodes()
        vol.GetDisplayNode().SetAutoWindowLevel(0)
        vol.GetDisplayNode().SetWindowLevel(window, level)
        self.logic.GetSliceCompositeNode().SetBackgroundVolumeID(vol.GetID())

    @staticmethod
    def preset_matrix(orientation: str) -> np.ndarray:
        """Slicer 5's Get{Axial,Sagittal,Coronal}SliceToRASMatrix (radiological)."""
        import slicer_core as sc
        from vtkmodules.vtkCommonMath import vtkMatrix3x3

        m = vtkMatrix3x3()
        getattr(sc.vtkMRMLSliceNode, f"Get{orientation.capitalize()}SliceToRASMatrix")(m, True)
        return np.array([[m.GetElement(r, c) for c in range(3)] for r in range(3)])

    def show(self, orientation: str, size: tuple[int, int], native_offset: float) -> None:
        """Orientation preset, FitSliceToAll at `size`, then Slicer's SetSliceOffset."""
        self.node.SetOrientation(orientation.capitalize())
        self.node.SetDimensions(size[0], size[1], 1)
        self.logic.FitSliceToAll(size[0], size[1])
        self.node.SetSliceOffset(native_offset)

    def fov(self) -> tuple[float, float]:
        f = self.node.GetFieldOfView()
        return (f[0], f[1])

    def centre(self) -> np.ndarray:
        m = self.node.GetSliceToRAS()
        return np.array([m.GetElement(r, 3) for r in range(3)])

    def range_step(self) -> tuple[float, float, float]:
        """GetSliceOffsetRangeResolution: (min, max, step), native offsets."""
        from vtkmodules.vtkCommonCore import reference

        rng = [0.0, 0.0]
        res = reference(1.0)
        self.logic.GetSliceOffsetRangeResolution(rng, res)
        return rng[0], rng[1], float(res)

    def xy_to_ras(self) -> np.ndarray:
        m = self.node.GetXYToRAS()
        return np.array([[m.GetElement(r, c) for c in range(4)] for r in range(4)])

    def pixel_ras(self, cols: np.ndarray, rows: np.ndarray, height: int) -> np.ndarray:
        """RAS of image pixels (column, row from the top) by Slicer's XYToRAS (XY origin at the bottom-left)."""
        xy = np.stack([cols, height - 1 - rows, np.zeros_like(cols), np.ones_like(cols)], axis=-1).astype(float)
        return (xy @ self.xy_to_ras().T)[..., :3]

    def image(self) -> np.ndarray:
        """Grey (H, W) uint8 as Slicer's view shows the slice logic's RGBA output (over black), first row at the
        top."""
        producer: Any = self.logic.GetImageDataConnection().GetProducer()
        producer.Update()
        out = producer.GetOutputDataObject(0)
        w, h, _ = out.GetDimensions()
        rgba = self.numpy_support.vtk_to_numpy(out.GetPointData().GetScalars()).reshape(h, w, -1)
        shown = rgba[::-1, :, 0].astype(np.uint16) * rgba[::-1, :, 3] // 255  # the view draws it over black
        return shown.astype(np.uint8)
