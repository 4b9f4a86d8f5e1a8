"""The copilot on the image a pathologist already has open in QuPath: a session on it (no case pack, nothing
loaded or closed), its name and path withheld from the model, and the agent's evidence written back into the
image's hierarchy after every answer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from copilot.host.qupath import PathologyHost
from qupath_ext.bridge import QuPathViewer, _Slide
from qupath_ext.evidence import EvidenceWriter, marks

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


def adopt_open_image(
    viewer: OpenImageViewer,
    trace_dir: str | Path | None = None,
    settings: Callable[[], Any] | None = None,
    client: Any = None,
    on_host: Callable[[Callable[[], Any]], Any] | None = None,
    budget: int = 12,
) -> PathologyHost:
    """A session on the image open in QuPath's current viewer, evidence written back as annotations."""
    writer = EvidenceWriter(viewer)
    return PathologyHost.adopt(
        viewer,
        image_facts=viewer.image_facts(),
        write_evidence=lambda evidence: [str(o.getID().toString()) for o in writer.write(marks(evidence))],
        trace_dir=trace_dir,
        settings=settings,
        client=client,
        on_host=on_host,
        budget=budget,
    )
