"""The source images a DICOM SEG references, and its frames in their order.

A series of single-frame images: the images in the volume's slice order, one SEG frame per slice. One
multi-frame instance (enhanced CT/MR/PET, RT Dose): that instance, the SEG frames in the instance's frame order
so each references its frame by number (highdicom writes ReferencedFrameNumber). A volume put together from
several multi-frame instances is refused (`invalid_source`): one SEG references one multi-frame source.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pydicom

from copilot.engine.volume.dicom_sources import source_frames
from copilot.errors import HandlerError


def seg_sources(volume: Any, mask: np.ndarray) -> tuple[list[pydicom.Dataset], np.ndarray]:
    """(source datasets with pixels, the binary mask as SEG frames in the sources' order) for a volume's mask."""
    frames = source_frames(volume, with_pixels=True)
    if frames is None:
        raise HandlerError("not_dicom", "the source series no longer matches the loaded volume")
    binary = (mask > 0).astype(np.uint8)
    if all(f.frame is None for f in frames):
        return [f.dataset for f in frames], binary
    instances = {str(f.dataset.SOPInstanceUID) for f in frames}
    if len(instances) > 1 or any(f.frame is None for f in frames):
        raise HandlerError(
            "invalid_source",
            f"{volume.name}: put together from {len(instances)} multi-frame instances; a SEG references one "
            "multi-frame source (open and segment each instance on its own)",
        )
    by_frame = np.zeros_like(binary)
    for k, f in enumerate(frames):
        assert f.frame is not None
        by_frame[f.frame - 1] = binary[k]
    return [frames[0].dataset], by_frame
