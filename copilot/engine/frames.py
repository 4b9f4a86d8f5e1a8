"""4D images (a time series or a set of diffusion or perfusion volumes in one NIfTI/NRRD/MHA file): one frame at
a time.

The viewer shows 3D volumes; a 4D file opens at one frame along its fourth axis (the first unless another is
asked for), and the frame and the number of frames stay with the volume (`time_frame`, `time_frames`), in the
inventory and in the viewer state. Another frame is opened like another series: a study reopened at it.
"""

from __future__ import annotations

import SimpleITK as sitk

from copilot.engine.volume import VolumeLoadError

FRAME_KEY = "time_frame"
FRAMES_KEY = "time_frames"


def frame_count(path: str) -> int:
    """Frames along the fourth axis of an image file (1 for a 3D image), from its header only."""
    reader = sitk.ImageFileReader()
    reader.SetFileName(path)
    try:
        reader.ReadImageInformation()
    except RuntimeError:
        return 1
    return int(reader.GetSize()[3]) if reader.GetDimension() == 4 else 1


def pick_frame(image: sitk.Image, frame: int | None, name: str) -> tuple[sitk.Image, int]:
    """(the 3D image at `frame` (default 0), number of frames) of a 4D image; refused by name out of range."""
    size = list(image.GetSize())
    count = int(size[3])
    index = 0 if frame is None else int(frame)
    if not 0 <= index < count:
        raise VolumeLoadError(f"{name}: frame {index} does not exist (frames 0–{count - 1})", "not_found")
    return sitk.Extract(image, [*size[:3], 0], [0, 0, 0, index]), count


def frame_facts(metadata: dict[str, str]) -> dict[str, int]:
    """{'time_frame', 'time_frames'} of a volume opened from a 4D file; {} otherwise."""
    if FRAMES_KEY not in metadata:
        return {}
    return {FRAME_KEY: int(metadata[FRAME_KEY]), FRAMES_KEY: int(metadata[FRAMES_KEY])}
