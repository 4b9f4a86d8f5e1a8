"""The evidence drawn on a case for its audit pages: the three views of the source series at the cited key
slices with the RAS point and the hidden lesion outline, or the slide overview with ground-truth ROIs, the
fields shown at each magnification and the cited points; one drawing per viewer kind (`EVIDENCE_DRAWINGS`).
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from copilot.bench.measures.coverage import MAG_BINS, mag_bin
from copilot.bench.scoring.scorers import Truth
from copilot.cases.pack import CasePack
from copilot.kind_names import PATHOLOGY, RADIOLOGY

MAG_COLOURS = {"2.5×": (40, 110, 230), "10×": (240, 140, 0), "40×": (150, 40, 180)}
VIEW_AXIS = {"red": "S", "yellow": "R", "green": "A"}
RAS = {"R": 0, "A": 1, "S": 2}


def png_uri(image: Image.Image) -> str:
    """A picture as a PNG data URI, for pages that stand alone."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _line(v: Any, axis: str, value: float, size: tuple[int, int]) -> list[tuple[float, float]]:
    """Image end points of the line where RAS[axis] == value on a view's plane."""
    other = next(a for a in "RAS" if a != axis and a != VIEW_AXIS[v.name])
    ends = []
    for t in (-1000.0, 1000.0):
        p = v.center.copy()
        p[RAS[axis]] = value
        p[RAS[other]] = v.center[RAS[other]] + t
        x, y = v.ras_to_image(p, size)
        ends.append((float(x), float(y)))
    return ends


def radiology_figures(case: CasePack, truth: Truth, answer: dict[str, Any], size: int = 320) -> list[tuple[str, str]]:
    """The three views of the source series at the cited key slices, with lines, point and lesion outline."""
    from copilot.cases.paths import case_path
    from copilot.engine.confine import case_folder
    from copilot.engine.volume.loading import load_case_volumes
    from copilot.engine.volume.viewer import EmbeddedVolumeViewer

    viewer = EmbeddedVolumeViewer()
    with case_folder(case.root):  # files the inputs name stay in the case, as in a session
        paths = [case_path(case.root, p) for p in case.inputs["volumes"]]
        ids = [viewer.add_volume(v) for v in load_case_volumes(paths)]
    source = truth.data.get("source_series") or case.inputs.get("default_volume")
    names = {viewer.volume(v).name: v for v in ids}
    vid = names.get(str(source), ids[0])
    viewer.select_volume(vid)
    viewer.recover_standard_views(vid)
    slices: dict[str, float] = answer.get("key_slices") or {}
    ras = answer.get("ras")
    mask_ras = None
    if truth.mask is not None and len(truth.mask_voxels):
        m = truth.mask.ijk_to_ras
        mask_ras = np.c_[truth.mask_voxels, np.ones(len(truth.mask_voxels))] @ m.T
        spacing = np.abs(m[:3, :3]).sum(axis=1)
    centre = ras or (mask_ras[:, :3].mean(axis=0).tolist() if mask_ras is not None else None)
    if centre is not None:
        viewer.jump(np.asarray(centre, dtype=float))
    out = []
    for name in ("red", "yellow", "green"):
        axis = VIEW_AXIS[name]
        if axis in slices:
            try:
                viewer.check_offset(name, slices[axis])
                viewer.set_slice_offset(name, slices[axis])
            except Exception:
                pass
        img = viewer.render(name, (size, size), remember=False).convert("RGB")
        v = viewer.view(name)
        draw = ImageDraw.Draw(img, "RGBA")
        if mask_ras is not None:
            near = np.abs(mask_ras[:, RAS[axis]] - v.offset) <= spacing[RAS[axis]] / 2 + 1e-6
            half = max(1.0, float(spacing.max()) / v.pixel_mm((size, size)) / 2)
            for x, y in v.ras_to_image(mask_ras[near, :3], (size, size)):
                draw.rectangle([x - half, y - half, x + half, y + half], fill=(0, 220, 0, 70))
        for other, value in slices.items():
            if other != axis:
                draw.line(_line(v, other, value, (size, size)), fill=(255, 215, 0, 255), width=1)
        if ras is not None:
            x, y = v.ras_to_image(np.asarray(ras, dtype=float), (size, size))
            on_plane = abs(ras[RAS[axis]] - v.offset) <= 1.0
            colour = (255, 40, 40, 255) if on_plane else (255, 40, 40, 140)
            draw.line([(x - 7, y), (x + 7, y)], fill=colour, width=2)
            draw.line([(x, y - 7), (x, y + 7)], fill=colour, width=2)
        label = f"{v.orientation} {axis} = {v.offset:.1f} mm"
        if axis in slices:
            label += f" (cited key slice {slices[axis]:.2f})"
        out.append((png_uri(img), label))
    return out


def pathology_figure(case: CasePack, truth: Truth, answer: dict[str, Any], coverage: dict[str, Any]) -> str:
    """The slide overview with ROIs (green), exclusions (grey), fields shown per magnification and cited points."""
    from copilot.engine.slide.source import SlideSource

    slide_path = case.root / str(case.inputs.get("slide", ""))
    src = SlideSource(slide_path)
    try:
        w0 = src.info.dimensions[0]
        thumb = src.make_thumbnail(640).convert("RGB")
    finally:
        src.close()
    s = thumb.width / w0
    draw = ImageDraw.Draw(thumb, "RGBA")
    for ann in truth.annotations:
        pts = [(float(px) * s, float(py) * s) for px, py in np.asarray(ann.exterior)]
        colour = (120, 120, 120, 255) if ann.cls.lower() == "exclusion" else (0, 190, 0, 255)
        draw.polygon(pts, outline=colour)
    for _seq, mag, x0, y0, x1, y1 in coverage.get("fields", []):
        r, g, b = MAG_COLOURS.get(mag_bin(mag) or "", (0, 0, 0))
        draw.rectangle([x0 * s, y0 * s, x1 * s, y1 * s], outline=(r, g, b, 255), fill=(r, g, b, 25))
    for x, y in answer.get("localizations", []):
        draw.ellipse([x * s - 5, y * s - 5, x * s + 5, y * s + 5], outline=(230, 30, 30, 255), width=2)
    legend = (
        "".join(f'<span style="color:rgb{MAG_COLOURS[b]}">■ fields at {b}</span>' for b in MAG_BINS)
        + '<span style="color:#0a0">□ ground-truth ROI</span><span style="color:#e22">○ cited point</span>'
    )
    img = f'<img class="overview" src="{png_uri(thumb)}">'
    return f'<figure>{img}<figcaption class="legend">{legend}</figcaption></figure>'


def _volume_evidence(case: CasePack, truth: Truth, answer: dict[str, Any], coverage: dict[str, Any]) -> str:
    """The three views through the hidden lesion with the cited key slices and RAS point, and their legend."""
    figs = radiology_figures(case, truth, answer)
    return "".join(
        f'<figure><img class="evidence-view" src="{uri}"><figcaption>{html.escape(cap)}</figcaption></figure>'
        for uri, cap in figs
    ) + (
        '<p class="legend"><span style="color:#0a0">■ hidden lesion</span>'
        '<span style="color:#c90">— cited key slices</span><span style="color:#e22">+ cited RAS</span></p>'
    )


EVIDENCE_DRAWINGS: dict[str, Callable[[CasePack, Truth, dict[str, Any], dict[str, Any]], str]] = {  # per kind
    RADIOLOGY: _volume_evidence,
    PATHOLOGY: pathology_figure,
}
