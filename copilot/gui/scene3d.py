"""The 3D view (VTK, offscreen): volume rendering of the active volume with presets, segments as surfaces,
evidence points as markers and the three slice planes, rendered to an RGB array.

VTK renders offscreen into its own framebuffer; the desktop app paints the array, so the same code
runs on a desktop, under Xvfb and on a headless machine. Without an X display the PyPI wheel's EGL
window is chosen (Mesa's software rasteriser when there is no GPU). Everything is placed in RAS
millimetres: each VTK image carries its volume's IJK→RAS matrix as the actor's user matrix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
    os.environ.setdefault("VTK_DEFAULT_OPENGL_WINDOW", "vtkEGLRenderWindow")

import vtk
from vtk.util.numpy_support import numpy_to_vtk, vtk_to_numpy

from copilot.gui.presets3d import PRESETS

MAX_VOXELS_3D = 160**3  # volumes are strided down to about this many voxels for interactive rendering
VIEW_COLOURS = {"red": (0.95, 0.33, 0.33), "yellow": (0.93, 0.84, 0.3), "green": (0.43, 0.7, 0.36)}
EVIDENCE_COLOUR = (1.0, 0.86, 0.0)


@dataclass
class Camera3D:
    """Where the camera looks from: rotation about the scene (degrees), zoom and pan (mm)."""

    azimuth: float = -30.0  # from the anterior right, a little above: the depth reads at first sight
    elevation: float = 15.0
    zoom: float = 1.0
    pan: tuple[float, float] = (0.0, 0.0)
    focus: tuple[float, float, float] | None = None  # RAS point the camera turns about (default: the volume centre)


def default_preset(modality: str, description: str = "", window_preset: str | None = None) -> str:
    """The 3D preset that fits a series: PET as a maximum-intensity projection; CT by the window the reader uses
    (or the series description: lung, bone) else soft tissue; MR and anything else from its window/level."""
    if modality == "PT":
        return "pet_mip"
    if modality != "CT":
        return "mr_default"
    hint = f"{window_preset or ''} {description}".lower()
    if "lung" in hint:
        return "ct_lung"
    if "bone" in hint:
        return "ct_bone"
    return "ct_soft_tissue"


def volume_preset(volume: Any, window_preset: str | None = None) -> str:
    """`default_preset` of a volume, from its modality, series description and window preset."""
    meta = getattr(volume, "metadata", {}) or {}
    description = f"{meta.get('SeriesDescription', '')} {getattr(volume, 'name', '')}"
    return default_preset(str(getattr(volume, "modality", "")), description, window_preset)


def _matrix(m: np.ndarray) -> Any:
    out = vtk.vtkMatrix4x4()
    for r in range(4):
        for c in range(4):
            out.SetElement(r, c, float(m[r, c]))
    return out


def _image(data: np.ndarray, stride: int) -> Any:
    """vtkImageData of a [k, j, i] array (strided), unit spacing: the user matrix places it."""
    d = np.ascontiguousarray(data[::stride, ::stride, ::stride])
    img = vtk.vtkImageData()
    img.SetDimensions(d.shape[2], d.shape[1], d.shape[0])
    img.SetSpacing(stride, stride, stride)
    arr = numpy_to_vtk(d.ravel(), deep=True)
    img.GetPointData().SetScalars(arr)
    return img


class Scene3D:
    """A VTK renderer kept in step with the viewer's scene; `render(size)` gives H×W×3 uint8 pixels."""

    def __init__(self) -> None:
        self.window = vtk.vtkRenderWindow()
        self.window.SetOffScreenRendering(1)
        self.window.SetMultiSamples(0)
        self.renderer = vtk.vtkRenderer()
        self.renderer.SetBackground(0.08, 0.09, 0.12)
        self.renderer.SetBackground2(0.25, 0.27, 0.35)
        self.renderer.GradientBackgroundOn()
        self.window.AddRenderer(self.renderer)
        self.camera = Camera3D()
        self.preset: str | None = None
        self.show_volume = True
        self.show_planes = True
        self._volume_key: Any = None
        self._volume_id: int | None = None
        self._volume_prop: Any = None
        self._volume_actor: Any = None
        self._segments: dict[int, Any] = {}
        self._points: list[Any] = []
        self._planes: list[Any] = []
        self._bounds: np.ndarray | None = None  # 8×3 RAS corners of the volume

    # ----- scene contents -----
    def set_volume(self, volume: Any, window: float, level: float, preset: str | None = None) -> None:
        """Volume-render `volume` (replacing the previous one) with a preset's transfer functions."""
        preset = preset or self.preset or volume_preset(volume)
        key = (id(volume), preset, round(window, 3), round(level, 3), bool(self._segments))
        if key == self._volume_key:
            return
        if self._volume_actor is None or self._volume_id != id(volume):
            if self._volume_actor is not None:
                self.renderer.RemoveVolume(self._volume_actor)
            stride = max(1, int(np.ceil((volume.data.size / MAX_VOXELS_3D) ** (1 / 3))))
            mapper = vtk.vtkSmartVolumeMapper()
            mapper.SetInputData(_image(volume.data, stride))
            actor = vtk.vtkVolume()
            actor.SetMapper(mapper)
            actor.SetUserMatrix(_matrix(volume.ijk_to_ras))
            self.renderer.AddVolume(actor)
            self._volume_actor = actor
            self._volume_id = id(volume)
            self._bounds = volume.corners_ras()
        prop = _transfer(preset, window, level, volume.value_range)
        prop.SetScalarOpacityUnitDistance(4.0 if self._segments else 1.0)  # see segments through the volume
        self._volume_actor.SetProperty(prop)
        mapper = self._volume_actor.GetMapper()
        mapper.SetBlendModeToMaximumIntensity() if preset == "pet_mip" else mapper.SetBlendModeToComposite()
        self._volume_actor.SetVisibility(self.show_volume)
        self.preset = preset
        self._volume_key = key

    def set_preset(self, preset: str) -> None:
        """Use a preset's transfer functions from the next render."""
        if preset not in PRESETS:
            raise ValueError(f"unknown 3D preset {preset!r}; presets: {PRESETS}")
        self.preset = preset
        self._volume_key = None

    def set_segments(self, segments: list[Any]) -> None:
        """Each segment as a smooth surface in its colour."""
        wanted = {id(s): s for s in segments}
        for sid in list(self._segments):
            if sid not in wanted:
                self.renderer.RemoveActor(self._segments.pop(sid))
        for sid, seg in wanted.items():
            if sid in self._segments:
                continue
            image = _image((seg.mask.data > 0).astype(np.float32), 1)
            surf = vtk.vtkFlyingEdges3D()
            surf.SetInputData(image)
            surf.SetValue(0, 0.5)
            smooth = vtk.vtkWindowedSincPolyDataFilter()
            smooth.SetInputConnection(surf.GetOutputPort())
            smooth.SetNumberOfIterations(15)
            smooth.SetPassBand(0.1)
            smooth.NormalizeCoordinatesOn()
            normals = vtk.vtkPolyDataNormals()
            normals.SetInputConnection(smooth.GetOutputPort())
            mapper = vtk.vtkPolyDataMapper()
            mapper.SetInputConnection(normals.GetOutputPort())
            mapper.ScalarVisibilityOff()
            actor = vtk.vtkActor()
            actor.SetMapper(mapper)
            actor.SetUserMatrix(_matrix(seg.mask.ijk_to_ras))
            actor.GetProperty().SetColor(*(c / 255.0 for c in seg.colour))
            actor.GetProperty().SetSpecular(0.3)
            self.renderer.AddActor(actor)
            self._segments[sid] = actor

    def set_points(self, points: list[tuple[list[float], bool]]) -> None:
        """Evidence points (RAS) as spheres; the selected one larger."""
        for actor in self._points:
            self.renderer.RemoveActor(actor)
        self._points = []
        extent = float(np.ptp(self._bounds, axis=0).max()) if self._bounds is not None else 100.0
        for ras, selected in points:
            src = vtk.vtkSphereSource()
            src.SetCenter(*(float(v) for v in ras))
            src.SetRadius(extent * (0.025 if selected else 0.015))
            src.SetThetaResolution(20)
            src.SetPhiResolution(20)
            mapper = vtk.vtkPolyDataMapper()
            mapper.SetInputConnection(src.GetOutputPort())
            actor = vtk.vtkActor()
            actor.SetMapper(mapper)
            actor.GetProperty().SetColor(*EVIDENCE_COLOUR)
            actor.GetProperty().SetAmbient(0.4)
            self.renderer.AddActor(actor)
            self._points.append(actor)

    def set_planes(self, planes: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """The slice planes ({view: (centre RAS, 3×3 orientation)}) clipped to the volume's box, as coloured
        translucent rectangles with solid outlines."""
        for actor in self._planes:
            self.renderer.RemoveActor(actor)
        self._planes = []
        if self._bounds is None or not self.show_planes:
            return
        lo, hi = self._bounds.min(axis=0), self._bounds.max(axis=0)
        for view, (centre, matrix) in planes.items():
            right, up, normal = matrix[:, 0], matrix[:, 1], matrix[:, 2]
            offset = float(normal @ centre)
            base = np.where(np.abs(normal) > 0.5, offset * np.sign(normal), 0.0)
            corner = np.where(np.abs(normal) > 0.5, base, lo)
            span_r = np.abs(right) * (hi - lo)
            span_u = np.abs(up) * (hi - lo)
            src = vtk.vtkPlaneSource()
            src.SetOrigin(*corner)
            src.SetPoint1(*(corner + span_r))
            src.SetPoint2(*(corner + span_u))
            for style in ("surface", "outline"):
                mapper = vtk.vtkPolyDataMapper()
                if style == "outline":
                    edges = vtk.vtkFeatureEdges()
                    edges.SetInputConnection(src.GetOutputPort())
                    edges.BoundaryEdgesOn()
                    edges.FeatureEdgesOff()
                    edges.NonManifoldEdgesOff()
                    edges.ManifoldEdgesOff()
                    mapper.SetInputConnection(edges.GetOutputPort())
                    mapper.ScalarVisibilityOff()
                else:
                    mapper.SetInputConnection(src.GetOutputPort())
                actor = vtk.vtkActor()
                actor.SetMapper(mapper)
                actor.GetProperty().SetColor(*VIEW_COLOURS.get(view, (0.8, 0.8, 0.8)))
                actor.GetProperty().SetOpacity(0.12 if style == "surface" else 1.0)
                actor.GetProperty().SetLineWidth(2)
                actor.GetProperty().LightingOff()
                self.renderer.AddActor(actor)
                self._planes.append(actor)

    # ----- camera -----
    def reset_camera(self) -> None:
        self.camera = Camera3D()

    def look_at(self, ras: list[float] | None) -> None:
        """Turn about a RAS point (an evidence item) from now on; None: the volume's centre."""
        self.camera.focus = None if ras is None else (float(ras[0]), float(ras[1]), float(ras[2]))
        self.camera.pan = (0.0, 0.0)

    def rotate(self, d_azimuth: float, d_elevation: float) -> None:
        c = self.camera
        c.azimuth = (c.azimuth + d_azimuth) % 360.0
        c.elevation = max(-89.0, min(89.0, c.elevation + d_elevation))

    def zoom(self, factor: float) -> None:
        self.camera.zoom = max(0.2, min(20.0, self.camera.zoom * factor))

    def pan(self, dx_mm: float, dy_mm: float) -> None:
        px, py = self.camera.pan
        self.camera.pan = (px + dx_mm, py + dy_mm)

    def _apply_camera(self, size: tuple[int, int]) -> None:
        """From anterior (Slicer's default 3D view, superior up) turned by the camera's azimuth and elevation, then
        the user's zoom and pan."""
        cam = self.renderer.GetActiveCamera()
        bounds = self._bounds if self._bounds is not None else np.array([[-50.0] * 3, [50.0] * 3])
        centre = (bounds.min(axis=0) + bounds.max(axis=0)) / 2
        if self.camera.focus is not None:
            centre = np.asarray(self.camera.focus, dtype=float)
        radius = float(np.linalg.norm(np.ptp(bounds, axis=0))) / 2 or 50.0
        c = self.camera
        direction, up = self.view_vectors()
        right = np.cross(-direction, up)
        focal = centre + right * c.pan[0] + up * c.pan[1]
        cam.SetFocalPoint(*focal)
        cam.SetPosition(*(focal + direction * radius * 4.0))
        cam.SetViewUp(*up)
        cam.SetViewAngle(30.0)
        w, h = size
        fit = 2 * np.degrees(np.arctan(radius / (radius * 4.0))) * max(1.0, h / w)
        cam.SetViewAngle(min(120.0, fit * 1.1 / c.zoom))
        self.renderer.ResetCameraClippingRange()

    def view_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(unit RAS direction from the focal point to the eye, the screen's up) of the camera: what the
        orientation marker shows."""
        az, el = np.radians(self.camera.azimuth), np.radians(self.camera.elevation)
        direction = np.array([np.sin(az) * np.cos(el), np.cos(az) * np.cos(el), np.sin(el)])
        up = np.array([-np.sin(az) * np.sin(el), -np.cos(az) * np.sin(el), np.cos(el)])
        return direction, up

    def screen_mm(self, size: tuple[int, int]) -> float:
        """Millimetres per screen pixel at the focal point (for panning by dragging)."""
        cam = self.renderer.GetActiveCamera()
        dist = cam.GetDistance()
        return float(2 * dist * np.tan(np.radians(cam.GetViewAngle()) / 2) / max(1, size[1]))

    # ----- pixels -----
    def render(self, size: tuple[int, int]) -> np.ndarray:
        w, h = max(16, int(size[0])), max(16, int(size[1]))
        self.window.SetSize(w, h)
        self._apply_camera((w, h))
        self.window.Render()
        grab = vtk.vtkWindowToImageFilter()
        grab.SetInput(self.window)
        grab.SetInputBufferTypeToRGB()
        grab.ReadFrontBufferOff()
        grab.Update()
        out = grab.GetOutput()
        dims = out.GetDimensions()
        pixels = vtk_to_numpy(out.GetPointData().GetScalars()).reshape(dims[1], dims[0], -1)[:, :, :3]
        return np.ascontiguousarray(pixels[::-1])  # VTK's rows run bottom-up

    def close(self) -> None:
        self.window.Finalize()


def _transfer(preset: str, window: float, level: float, value_range: tuple[float, float]) -> Any:
    """Colour and opacity transfer functions of a preset (CT presets in Hounsfield units; MR and PET from the
    volume's window/level)."""
    colour = vtk.vtkColorTransferFunction()
    opacity = vtk.vtkPiecewiseFunction()
    lo_v = value_range[0]
    pts: list[tuple[float, tuple[float, float, float], float]]
    if preset == "ct_bone":
        pts = [(-1000, (0, 0, 0), 0.0), (150, (0.55, 0.25, 0.15), 0.0), (300, (0.9, 0.82, 0.66), 0.35),
               (1500, (1, 1, 0.95), 0.8)]  # fmt: skip
    elif preset == "ct_lung":
        pts = [(-1000, (0, 0, 0), 0.0), (-900, (0.3, 0.4, 0.6), 0.0), (-500, (0.6, 0.7, 0.9), 0.06),
               (-200, (0.8, 0.5, 0.4), 0.0), (200, (0.9, 0.6, 0.5), 0.0)]  # fmt: skip
    elif preset == "ct_soft_tissue":
        pts = [(-1000, (0, 0, 0), 0.0), (-100, (0.55, 0.25, 0.15), 0.0), (40, (0.85, 0.45, 0.35), 0.12),
               (300, (1, 0.9, 0.8), 0.5), (1500, (1, 1, 1), 0.8)]  # fmt: skip
    elif preset == "pet_mip":
        lo, hi = level - window / 2, level + window / 2
        pts = [(lo, (0, 0, 0), 0.0), (lo + 0.33 * (hi - lo), (1, 0, 0), 0.3), (lo + 0.66 * (hi - lo), (1, 1, 0), 0.7),
               (hi, (1, 1, 1), 1.0)]  # fmt: skip
    else:
        lo, hi = level - window / 2, level + window / 2
        pts = [(min(lo_v, lo), (0, 0, 0), 0.0), (lo + 0.15 * (hi - lo), (0.3, 0.25, 0.2), 0.0),
               (lo + 0.5 * (hi - lo), (0.8, 0.7, 0.6), 0.08), (hi, (1, 0.97, 0.92), 0.25)]  # fmt: skip
    for value, rgb, alpha in pts:
        colour.AddRGBPoint(float(value), *rgb)
        opacity.AddPoint(float(value), float(alpha))
    prop = vtk.vtkVolumeProperty()
    prop.SetColor(colour)
    prop.SetScalarOpacity(opacity)
    prop.SetInterpolationTypeToLinear()
    prop.ShadeOn() if preset not in ("pet_mip", "ct_lung") else prop.ShadeOff()
    prop.SetAmbient(0.3)
    prop.SetDiffuse(0.7)
    return prop
