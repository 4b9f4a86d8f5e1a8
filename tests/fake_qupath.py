"""A test double of QuPath's Py4J entry point, backed by the embedded slide viewer.

It answers the same Java method names that `QuPathViewer` calls (`getCurrentViewer`,
`setCenterPixelLocation`, `setDownsampleFactor(d, -1, -1)`, `componentPointToImagePoint`,
`snapshotBase64`, `getQuPath().openImage(...)`, ...) so the bridge's argument mapping and
coordinate maths are exercised without QuPath. It is not QuPath: the live tests are marked `qupath`.
"""

from __future__ import annotations

import base64
import io
from types import SimpleNamespace
from typing import Any

from copilot.engine.slide_viewer import MIN_DOWNSAMPLE, EmbeddedSlideViewer


class _Point:
    def __init__(self, x: float, y: float) -> None:
        self._x, self._y = x, y

    def getX(self) -> float:
        return self._x

    def getY(self) -> float:
        return self._y


class FakeServer:
    def __init__(self, viewer: EmbeddedSlideViewer) -> None:
        self.info = viewer.slide.info

    def nResolutions(self) -> int:
        return len(self.info.level_downsamples)

    def getDownsampleForResolution(self, i: int) -> float:
        return self.info.level_downsamples[i]

    def getWidth(self) -> int:
        return self.info.dimensions[0]

    def getHeight(self) -> int:
        return self.info.dimensions[1]

    def getPixelCalibration(self) -> Any:
        mpp = self.info.mpp
        return SimpleNamespace(
            hasPixelSizeMicrons=lambda: mpp is not None,
            getPixelWidthMicrons=lambda: mpp[0],
            getPixelHeightMicrons=lambda: mpp[1],
        )

    def getMetadata(self) -> Any:
        return SimpleNamespace(getMagnification=lambda: float("nan"), getName=lambda: self.info.name)

    def getURIs(self) -> list[str]:
        return [f"file://{self.info.path}"]


class FakeViewer:
    def __init__(self, embedded: EmbeddedSlideViewer) -> None:
        self.e = embedded
        self.image_type = "UNSET"

    def getServer(self) -> FakeServer | None:
        return FakeServer(self.e) if self.e.slide is not None else None

    def getCenterPixelX(self) -> float:
        return self.e.viewport.cx

    def getCenterPixelY(self) -> float:
        return self.e.viewport.cy

    def setCenterPixelLocation(self, x: float, y: float) -> None:
        self.e.viewport.cx, self.e.viewport.cy = x, y

    def getDownsampleFactor(self) -> float:
        return self.e.viewport.downsample

    def setDownsampleFactor(self, d: float, x: float, y: float) -> None:
        assert (x, y) == (-1.0, -1.0), "the bridge must keep the centre"
        self.e.viewport.downsample = min(max(d, MIN_DOWNSAMPLE), self.getMaxDownsample())

    def getMinDownsample(self) -> float:
        return MIN_DOWNSAMPLE

    def getMaxDownsample(self) -> float:
        return self.e.max_downsample()

    def zoomToFit(self) -> None:
        self.e.fit()

    def getView(self) -> Any:
        return SimpleNamespace(
            getWidth=lambda: float(self.e.viewport.width), getHeight=lambda: float(self.e.viewport.height)
        )

    def componentPointToImagePoint(self, x: float, y: float, dest: Any, clip: bool) -> _Point:
        return _Point(*self.e.viewport.screen_to_level0(x, y))

    def getImageData(self) -> Any:
        if self.e.slide is None:
            return None
        viewer = self

        class _Type:
            def __init__(self, name: str) -> None:
                self._name = name

            def name(self) -> str:
                return self._name

        return SimpleNamespace(
            getImageType=lambda: _Type(viewer.image_type), setImageType=lambda t: setattr(viewer, "image_type", t)
        )

    def resetImageData(self) -> None:
        self.e.close()


class FakeEntryPoint:
    def __init__(self) -> None:
        self.embedded = EmbeddedSlideViewer()
        self.viewer = FakeViewer(self.embedded)
        self.calls: list[str] = []
        fake = self

        class _QuPath:
            def openImage(self, viewer: FakeViewer, path: str, prompt: bool, urls: bool) -> bool:
                assert viewer is fake.viewer and prompt is False and urls is False
                try:
                    fake.embedded.open(path)
                except Exception:
                    return False
                return True

        self.qupath = _QuPath()

    def getQuPath(self) -> Any:
        return self.qupath

    def getCurrentViewer(self) -> FakeViewer:
        return self.viewer

    def snapshotBase64(self, viewer: FakeViewer) -> str:
        buf = io.BytesIO()
        viewer.e.render().save(buf, format="PNG")
        return base64.b64encode(buf.getvalue()).decode()


class FakeJvm:
    """`jvm.qupath.lib.images.ImageData.ImageType.valueOf(name)` → the name."""

    def __init__(self) -> None:
        self.qupath = SimpleNamespace(
            lib=SimpleNamespace(
                images=SimpleNamespace(ImageData=SimpleNamespace(ImageType=SimpleNamespace(valueOf=lambda n: n)))
            )
        )
