"""`QuPathViewer`: the slide-viewer protocol against a running QuPath (≥ 0.6) through its Py4J gateway.

QuPath's Py4J extension (Extensions › Py4J › Start Py4J Gateway; default port 25333, optional
token) exposes `QuPathEntryPoint`, which extends `QPEx`: `getQuPath()`, `getCurrentViewer()` and
the static `snapshotBase64(QuPathViewer)`. The viewer's own methods do the rest:
`getCenterPixelX/Y`, `setCenterPixelLocation(x, y)`, `getDownsampleFactor`,
`setDownsampleFactor(d, -1, -1)` (keeps the centre; the one-argument form zooms about the mouse),
`zoomToFit()`, `componentPointToImagePoint(x, y, null, false)` and `getView()` for the component
size. Calls that open or close images run on the JavaFX thread through
`FXUtils.callOnApplicationThread(Callable)`. The `Callable` is built in Java (a `java.beans.Expression`
of the call behind an `EventHandler` proxy): a Python-implemented one would run its own Java calls on a
Py4J connection thread, not the FX thread, under QuPath's `GatewayServer`. No script is ever sent to
QuPath. Java exceptions become `qupath_error` handler errors carrying the Java message; a gateway that
has gone away becomes `qupath_unavailable` (the call is refused, nothing hangs: reads time out).
"""

from __future__ import annotations

import base64
import functools
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from PIL import Image

from copilot.engine.geometry import Viewport, pyramid_level
from copilot.engine.peek import Peek, peek_slide
from copilot.engine.slide.source import SlideInfo
from copilot.engine.slide.viewer import IMAGE_TYPES, full_magnification, viewport_state
from copilot.errors import ViewerError

DEFAULT_PORT = 25333
READ_TIMEOUT_S = 60.0  # longest a single QuPath call may take before the gateway counts as gone


def java_error(exc: BaseException) -> ViewerError | None:
    """The handler error for a Py4J failure: a Java exception, or a gateway that is no longer there."""
    from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError

    if isinstance(exc, Py4JJavaError):
        try:
            detail = str(exc.java_exception.toString())
        except Exception:  # the gateway died while reporting
            detail = str(exc).strip().splitlines()[0]
        return ViewerError("qupath_error", f"QuPath raised {detail}")
    if isinstance(exc, Py4JNetworkError | ConnectionError):
        return ViewerError("qupath_unavailable", f"QuPath's Py4J gateway is gone ({exc}); restart it and reconnect")
    if isinstance(exc, Py4JError):
        return ViewerError("qupath_error", f"QuPath call failed: {exc}")
    return None


def _java_call(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn Py4J failures inside a bridge method into handler errors."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ViewerError:
            raise
        except Exception as exc:
            err = java_error(exc)
            if err is None:
                raise
            raise err from exc

    return wrapper


@dataclass
class _Slide:
    info: SlideInfo


class QuPathViewer:
    """Drives the current QuPath viewer; the same surface as `EmbeddedSlideViewer`."""

    kind = "pathology"
    backend = "qupath"  # what a trace header records: the calls ran on QuPath's own viewer

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self.ep = gateway.entry_point
        self.jvm = gateway.jvm
        self.last_action = "none"

    @classmethod
    def connect(cls, port: int = DEFAULT_PORT, token: str | None = None, read_timeout: float = READ_TIMEOUT_S) -> Self:
        """Connect to QuPath's Py4J gateway (as qubalab's `create_gateway` does); a wrong token is refused."""
        from py4j.java_gateway import GatewayParameters, JavaGateway

        gateway = JavaGateway(
            gateway_parameters=GatewayParameters(
                port=port, auth_token=token, auto_convert=True, read_timeout=read_timeout
            ),
        )
        try:
            if gateway.entry_point.getQuPath() is None:
                raise ConnectionError("the gateway's entry point has no QuPath")
        except Exception as exc:
            gateway.close()
            raise ConnectionError(f"no QuPath Py4J gateway on port {port} with this token: {exc}") from exc
        return cls(gateway)

    def disconnect(self) -> None:
        """Close this client's connections; QuPath's gateway keeps running (`shutdown()` would stop it)."""
        self.gateway.close()
        client = getattr(self.gateway, "_gateway_client", None)
        if client is not None:  # later calls (and Py4J's finalizers) are refused here, not sent to a closed socket
            client.is_connected = False

    def on_fx(self, target: Any, method: str, *args: Any) -> Any:
        """`target.method(*args)` on QuPath's JavaFX thread; its result, or None when it threw there."""
        jvm = self.jvm
        arguments = self.gateway.new_array(jvm.java.lang.Object, len(args))
        for n, value in enumerate(args):
            arguments[n] = value
        call = jvm.java.beans.Expression(target, method, arguments)
        callable_ = jvm.java.beans.EventHandler.create(
            jvm.java.lang.Class.forName("java.util.concurrent.Callable"), call, "getValue"
        )
        return jvm.qupath.fx.utils.FXUtils.callOnApplicationThread(callable_)

    # ----- QuPath objects -----
    @property
    @_java_call
    def _viewer(self) -> Any:
        viewer = self.ep.getCurrentViewer()
        if viewer is None:
            raise ViewerError("no_viewer", "QuPath has no active viewer")
        return viewer

    @_java_call
    def _server(self) -> Any:
        server = self._viewer.getServer()
        if server is None:
            raise ViewerError("no_image", "no image is open in QuPath; call load_case or load_image")
        return server

    @_java_call
    def image_data(self) -> Any:
        """QuPath's `ImageData` of the open image (its server, type and object hierarchy)."""
        data = self._viewer.getImageData()
        if data is None:
            raise ViewerError("no_image", "no image is open in QuPath")
        return data

    @_java_call
    def has_image(self) -> bool:
        return self.ep.getCurrentViewer() is not None and self._viewer.getServer() is not None

    @_java_call
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
    @_java_call
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
        """The viewport to put back if a call fails; none when QuPath cannot be reached (the call will say so)."""
        try:
            vp = self.viewport if self.has_image() else None
        except ViewerError:
            vp = None
        return {"viewport": vp, "last_action": self.last_action}

    def restore_state(self, state: dict[str, Any]) -> None:
        vp = state["viewport"]
        try:
            if vp is not None and self.has_image():
                self._viewer.setDownsampleFactor(float(vp.downsample), -1.0, -1.0)
                self._viewer.setCenterPixelLocation(float(vp.cx), float(vp.cy))
        except Exception as exc:  # QuPath is gone: there is nothing left to restore
            if not isinstance(exc, ViewerError) and java_error(exc) is None:
                raise
        self.last_action = state["last_action"]

    # ----- image -----
    @_java_call
    def open(self, path: str | Path, image_type: str = "BRIGHTFIELD_H_E") -> None:
        qupath, viewer = self.ep.getQuPath(), self._viewer
        ok = self.on_fx(qupath, "openImage", viewer, str(path), False, False)
        if not ok:
            raise ViewerError("load_failed", f"QuPath could not open {Path(path).name} (QuPath's log says why)")
        if image_type != "UNSET":
            self.set_image_type(image_type)
        self.fit()

    @_java_call
    def close(self) -> None:
        self.on_fx(self._viewer, "resetImageData")

    @_java_call
    def set_image_type(self, image_type: str) -> None:
        if image_type not in IMAGE_TYPES:
            raise ViewerError("invalid_arguments", f"image type must be one of {IMAGE_TYPES}")
        data = self._viewer.getImageData()
        if data is None:
            raise ViewerError("no_image", "no image is open in QuPath")
        data.setImageType(self.jvm.qupath.lib.images.ImageData.ImageType.valueOf(image_type))

    @property
    @_java_call
    def image_type(self) -> str:
        data = self._viewer.getImageData()
        return "UNSET" if data is None else str(data.getImageType().name())

    # ----- geometry -----
    @_java_call
    def full_magnification(self) -> float | None:
        return full_magnification(self.require().info)

    @_java_call
    def magnification(self) -> float | None:
        full = self.full_magnification()
        return None if full is None else full / self.viewport.downsample

    @_java_call
    def fit(self) -> None:
        self._viewer.zoomToFit()

    @_java_call
    def set_downsample(self, downsample: float, anchor: tuple[float, float] | None = None) -> bool:
        if not (math.isfinite(downsample) and downsample > 0):
            raise ViewerError("invalid_arguments", "the zoom must give a positive, finite downsample")
        viewer = self._viewer
        lo, hi = float(viewer.getMinDownsample()), float(viewer.getMaxDownsample())
        new = min(max(float(downsample), lo), hi)  # Py4J passes a Python int as Integer: no (double) overload
        if anchor is not None:
            vp = self.viewport
            ratio = new / vp.downsample
            viewer.setCenterPixelLocation(
                anchor[0] + (vp.cx - anchor[0]) * ratio, anchor[1] + (vp.cy - anchor[1]) * ratio
            )
        viewer.setDownsampleFactor(new, -1.0, -1.0)
        return not math.isclose(new, downsample, rel_tol=1e-12)

    @_java_call
    def set_centre(self, x: float, y: float) -> bool:
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ViewerError("invalid_arguments", "the centre must be finite")
        w, h = self.require().info.dimensions
        cx, cy = min(max(float(x), 0.0), float(w)), min(max(float(y), 0.0), float(h))
        self._viewer.setCenterPixelLocation(cx, cy)
        return (cx, cy) != (x, y)

    @_java_call
    def point_to_level0(self, x1000: float, y1000: float) -> tuple[float, float]:
        """QuPath's own component → image transform (it accounts for rotation too)."""
        vp = self.viewport
        p = self._viewer.componentPointToImagePoint(x1000 / 1000.0 * vp.width, y1000 / 1000.0 * vp.height, None, False)
        return (float(p.getX()), float(p.getY()))

    def overview_box(self) -> tuple[int, int, int, int] | None:
        return None  # QuPath places its own overview; it is not reported through the API

    @_java_call
    def render(self, overlays: bool = True) -> Image.Image:
        """QuPath's own viewer snapshot (its overlays are whatever QuPath shows)."""
        data = base64.b64decode(str(self.ep.snapshotBase64(self._viewer)))
        return Image.open(io.BytesIO(data)).convert("RGB")

    def peek(self, request: Peek) -> dict[str, Image.Image]:
        """QuPath's snapshot for a `Peek` (the session puts the viewport back afterwards)."""
        return peek_slide(self, request)

    def geometry(self, view: str = "viewer") -> Viewport:
        """The viewport as QuPath's viewer holds it now (a fresh value each time)."""
        return self.viewport

    def scene_data(self) -> dict[str, Any]:
        """Slides have no 3D scene."""
        return {}

    @_java_call
    def state(self) -> dict[str, Any]:
        if not self.has_image():
            return {"image_open": False, "image_type": "UNSET", "last_action": self.last_action}
        info = self.require().info
        vp = self.viewport
        level = pyramid_level(info.level_downsamples, vp.downsample)
        return viewport_state(info, vp, self.magnification(), self.image_type, level, self.last_action)
