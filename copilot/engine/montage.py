"""Track C input pictures (Appendix C.2) for pipelines that do not drive a viewer, one drawer per viewer kind.

Each loaded series becomes one picture: a row of axial tiles, then sagittal and coronal tiles, evenly spaced
between 10 % and 90 % of each view's offset range, each tile carrying the viewer's corner overlay (so the RAS-axis
millimetres of every slice can be read off it, as the evidence format needs). A slide becomes a thumbnail of the
whole slide with its size and pixel size written on it. The kinds name their drawer (`ViewerKind.montage`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image, ImageDraw

from copilot.engine.confine import case_folder, confine
from copilot.engine.volume.loading import load_case_volumes
from copilot.engine.volume.render import overlay_font
from copilot.engine.volume.viewer import EmbeddedVolumeViewer


class CaseInputs(Protocol):
    """What a drawer reads of a case pack: its folder, its id and the inputs it names."""

    @property
    def root(self) -> Path: ...

    @property
    def case_id(self) -> str: ...

    @property
    def inputs(self) -> dict[str, Any]: ...


def _grid(tiles: list[Image.Image], columns: int, title: str) -> Image.Image:
    w, h = tiles[0].size
    rows = -(-len(tiles) // columns)
    out = Image.new("RGB", (columns * w, rows * h + 24), (0, 0, 0))
    ImageDraw.Draw(out).text((6, 4), title, fill=(255, 255, 255), font=overlay_font(14))
    for n, tile in enumerate(tiles):
        out.paste(tile.convert("RGB"), ((n % columns) * w, 24 + (n // columns) * h))
    return out


def volume_montages(case: CaseInputs, axial: int = 12, other: int = 6, tile: int = 192) -> dict[str, Image.Image]:
    """One montage per loaded series of a radiology case, named by the series."""
    paths = [confine(case.root, p) for p in case.inputs.get("volumes", [])]
    viewer = EmbeddedVolumeViewer()
    with case_folder(case.root):  # files the inputs name stay in the case, as in a session
        ids = [viewer.add_volume(v) for v in load_case_volumes(paths)]
    out = {}
    for vid in ids:
        viewer.recover_standard_views(vid)
        tiles = []
        for view, count in (("red", axial), ("yellow", other), ("green", other)):
            lo, hi = viewer.slice_offset_range(view)
            for off in np.linspace(lo + 0.1 * (hi - lo), hi - 0.1 * (hi - lo), count):
                viewer.set_slice_offset(view, float(off))
                tiles.append(viewer.render(view, (tile, tile), remember=False))
        name = viewer.volume(vid).name
        out[name] = _grid(tiles, 6, f"{case.case_id}  {name}: axial (S), sagittal (R), coronal (A) slices")
    return out


def slide_montage(case: CaseInputs, side: int = 1024) -> dict[str, Image.Image]:
    """A slide case's thumbnail (`slide`), its size and pixel size written on it."""
    from copilot.engine.slide.source import SlideSource

    with case_folder(case.root):
        slide = SlideSource(confine(case.root, case.inputs["slide"]))
    info = slide.info
    w, h = info.dimensions
    scale = side / max(w, h)
    thumb = slide.make_thumbnail(side)
    slide.close()
    mpp = f"{info.mpp[0]:g} um/px" if info.mpp else "pixel size unknown"
    title = f"{case.case_id}: {w} x {h} px, {mpp}; 1 thumbnail px = {1 / scale:.1f} slide px"
    return {"slide": _grid([thumb], 1, title)}
