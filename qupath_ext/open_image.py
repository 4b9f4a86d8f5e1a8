"""QuPath's viewer on the image a pathologist already has open: its name and path withheld from the model, its
facts for the panel, its own annotations listed read-only (the session on it is `copilot.host.qupath`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from qupath_ext.bridge import QuPathViewer, _Slide
from qupath_ext.evidence import EvidenceWriter

MODEL_IMAGE_NAME = "open image"  # what the model calls the slide (its file name may identify the patient)


class OpenImageViewer(QuPathViewer):
    """QuPath's viewer on the pathologist's open image; the model sees no image name or path, and the image's own
    annotations can be listed (read-only)."""

    def require(self) -> _Slide:
        info = super().require().info
        return _Slide(dataclasses.replace(info, name=MODEL_IMAGE_NAME, path=""))

    def image_facts(self) -> dict[str, Any]:
        """For the panel: the image server's path, size, µm per pixel and levels (never sent to the model)."""
        info = super().require().info
        return {
            "path": info.path,
            "name": info.name,
            "dimensions": list(info.dimensions),
            "mpp": list(info.mpp) if info.mpp else None,
            "levels": len(info.level_downsamples),
            "level_downsamples": list(info.level_downsamples),
        }

    def annotations(self) -> list[dict[str, Any]]:
        return EvidenceWriter(self).annotations()
