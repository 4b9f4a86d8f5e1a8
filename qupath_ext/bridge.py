"""`QuPathViewer`: the slide-viewer protocol against a running QuPath (≥ 0.6) through its Py4J gateway.

QuPath's Py4J extension (Extensions › Py4J › Start Py4J Gateway; default port 25333, optional
token) exposes `QuPathEntryPoint`, which extends `QPEx`: `getQuPath()`, `getCurrentViewer()` and
the static `snapshotBase64(QuPathViewer)`. The viewer's own methods do the rest:
`getCenterPixelX/Y`, `setCenterPixelLocation(x, y)`, `getDownsampleFactor`,
`setDownsampleFactor(d, -1, -1)` (keeps the centre; the one-argument form zooms about the mouse),
`zoomToFit()`, `componentPointToImagePoint(x, y, null, false)` and `getView()` for the component
size. Calls that open images or show dialogs must run on the JavaFX thread: they are wrapped in a
Python-implemented `java.util.concurrent.Callable` passed to `FXUtils.callOnApplicationThread`,
which needs the gateway's callback server. No script is ever sent to QuPath.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from PIL import Image

from copilot.engine.geometry import Viewport, pyramid_level
from copilot.engine.slide import SlideInfo
from copilot.engine.slide_viewer import IMAGE_TYPES, full_magnification, viewport_state
from copilot.errors import ViewerError

DEFAULT_PORT = 25333


@dataclass
class _Slide:
    info: SlideInfo


class _FxCall:
    """A `java.util.concurrent.Callable` implemented in Python (Py4J callback)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def call(self) -> Any:
        return self.fn()

    class Java:
        implements: ClassVar[list[str]] = ["java.util.concurrent.Callable"]


class QuPathViewer:
    """Drives the current QuPath viewer; the same surface as `EmbeddedSlideViewer`."""

    kind = "pathology"

    def __init__(self, entry_point: Any, jvm: Any = None, on_fx_thread: Any = None) -> None:
        self.ep = entry_point
        self.jvm = jvm
        self._on_fx = on_fx_thread or (lambda fn: fn())
        self.last_action = "none"

    @classmethod
    def connect(cls, port: int = DEFAULT_PORT, token: str | None = None) -> QuPathViewer:
        """Connect to QuPath's Py4J gateway (as qubalab's `create_gateway` does) with a callback server."""
        from py4j.java_gateway import CallbackServerParameters, GatewayParameters, JavaGateway

        gateway = JavaGateway(
            gateway_parameters=GatewayParameters(port=port, auth_token=token, auto_convert=True),
            callback_server_parameters=CallbackServerParameters(port=0, auth_token=token),
        )
        try:
            gateway.entry_point.getQuPath()
        except Exception as exc:
            gateway.shutdown()
            raise ConnectionError(f"no QuPath Py4J gateway on port {port}: {exc}") from exc
        fx_utils = gateway.jvm.qupath.fx.utils.FXUtils

        def on_fx(fn: Any) -> Any:
            return fx_utils.callOnApplicationThread(_FxCall(fn))

        return cls(gateway.entry_point, gateway.jvm, on_fx)

    # ----- QuPath objects -----
    @property
    def _viewer(self) -> Any:
        viewer = self.ep.getCurrentViewer()
        if viewer is None:
            raise ViewerError("no_viewer", "QuPath has no active viewer")
        return viewer

    def _server(self) -> Any:
        server = self._viewer.getServer()
        if server is None:
            raise ViewerError("no_image", "no image is open in QuPath; call load_case or load_image")
        return server

    def has_image(self) -> bool:
        return self.ep.getCurrentViewer() is not None and self._viewer.getServer() is not None

    def require(self) -> _Slide:
        server = self._server()
        n = int(server.nResolutions())
        downsamples = tuple(float(server.getDownsampleForResolution(i)) for i in range(n))
        w, h = int(server.getWidth()), int(server.getHeight())
        cal = server.getPixelCalibration()
        mpp = None
        if bool(cal.hasPixelSizeMicrons()):
            mpp = (float(cal.getPixelWidthMicrons()), float(cal.getPixelHeightMicrons()))
        mag = server.getMetadata().getMagnification()
        objective = float(mag) if mag is not None and not math.isnan(float(mag)) else None
        uris = list(server.getURIs())
        path = str(uris[0]) if uris else str(server.getPath())
        info = SlideInfo(
            path=path,
            name=str(server.getMetadata().getName()),
            dimensions=(w, h),
            level_dimensions=tuple((round(w / d), round(h / d)) for d in downsamples),
            level_downsamples=downsamples,
            mpp=mpp,
            objective_power=objective,
            backend="qupath",
        )
        return _Slide(info)

    # ----- state -----
    @property
    def viewport(self) -> Viewport:
        v = self._viewer
        view = v.getView()
        return Viewport(
            float(v.getCenterPixelX()),
            float(v.getCenterPixelY()),
            float(v.getDownsampleFactor()),
            math.ceil(float(view.getWidth())),
            math.ceil(float(view.getHeight())),
        )

    def export_state(self) -> dict[str, Any]:
        vp = self.viewport if self.has_image() else None
        return {"viewport": vp, "last_action": self.last_action}

    def restore_state(self, state: dict[str, Any]) -> None:
        vp = state["viewport"]
        if vp is not None and self.has_image():
            self._viewer.setDownsampleFactor(vp.downsample, -1.0, -1.0)
            self._viewer.setCenterPixelLocation(vp.cx, vp.cy)
        self.last_action = state["last_action"]

    # ----- image -----
    def open(self, path: str | Path, image_type: str = "BRIGHTFIELD_H_E") -> None:
        qupath, viewer = self.ep.getQuPath(), self._viewer
        ok = self._on_fx(lambda: qupath.openImage(viewer, str(path), False, False))
        if not ok:
            raise ViewerError("load_failed", f"QuPath could not open {Path(path).name}")
        if image_type != "UNSET":
            self.set_image_type(image_type)
        self.fit()

    def close(self) -> None:
        viewer = self._viewer
        self._on_fx(viewer.resetImageData)

    def set_image_type(self, image_type: str) -> None:
        if image_type not in IMAGE_TYPES:
            raise ViewerError("invalid_arguments", f"image type must be one of {IMAGE_TYPES}")
        data = self._viewer.getImageData()
        if data is None:
            raise ViewerError("no_image", "no image is open in QuPath")
        data.setImageType(self.jvm.qupath.lib.images.ImageData.ImageType.valueOf(image_type))

    @property
    def image_type(self) -> str:
        data = self._viewer.getImageData()
        return "UNSET" if data is None else str(data.getImageType().name())

    # ----- geometry -----
    def full_magnification(self) -> float | None:
        return full_magnification(self.require().info)

    def magnification(self) -> float | None:
        full = self.full_magnification()
        return None if full is None else full / self.viewport.downsample

    def fit(self) -> None:
        self._viewer.zoomToFit()

    def set_downsample(self, downsample: float, anchor: tuple[float, float] | None = None) -> bool:
        if not (math.isfinite(downsample) and downsample > 0):
            raise ViewerError("invalid_arguments", "the zoom must give a positive, finite downsample")
        viewer = self._viewer
        lo, hi = float(viewer.getMinDownsample()), float(viewer.getMaxDownsample())
        new = min(max(downsample, lo), hi)
        if anchor is not None:
            vp = self.viewport
            ratio = new / vp.downsample
            viewer.setCenterPixelLocation(
                anchor[0] + (vp.cx - anchor[0]) * ratio, anchor[1] + (vp.cy - anchor[1]) * ratio
            )
        viewer.setDownsampleFactor(new, -1.0, -1.0)
        return not math.isclose(new, downsample, rel_tol=1e-12)

    def set_centre(self, x: float, y: float) -> bool:
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ViewerError("invalid_arguments", "the centre must be finite")
        w, h = self.require().info.dimensions
        cx, cy = min(max(x, 0.0), float(w)), min(max(y, 0.0), float(h))
        self._viewer.setCenterPixelLocation(cx, cy)
        return (cx, cy) != (x, y)

    def point_to_level0(self, x1000: float, y1000: float) -> tuple[float, float]:
        """QuPath's own component → image transform (it accounts for rotation too)."""
        vp = self.viewport
        p = self._viewer.componentPointToImagePoint(x1000 / 1000.0 * vp.width, y1000 / 1000.0 * vp.height, None, False)
        return (float(p.getX()), float(p.getY()))

    def overview_box(self) -> tuple[int, int, int, int] | None:
        return None  # QuPath places its own overview; it is not reported through the API

    def render(self, overlays: bool = True) -> Image.Image:
        """QuPath's own viewer snapshot (its overlays are whatever QuPath shows)."""
        data = base64.b64decode(str(self.ep.snapshotBase64(self._viewer)))
        return Image.open(io.BytesIO(data)).convert("RGB")

    def state(self) -> dict[str, Any]:
        if not self.has_image():
            return {"image_open": False, "image_type": "UNSET", "last_action": self.last_action}
        info = self.require().info
        vp = self.viewport
        level = pyramid_level(info.level_downsamples, vp.downsample)
        return viewport_state(info, vp, self.magnification(), self.image_type, level, self.last_action)
