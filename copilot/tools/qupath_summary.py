"""The two per-round texts of the pathology protocol (Appendix H.2): a direct viewer-state summary and a
rule-based GUI/control summary. Both say only what the viewer state says (software state, not
pathology evidence). The image's file name is study text: it comes as a labelled `<study-data>` field."""

from __future__ import annotations

from typing import Any

from copilot.tools.study_text import field

IMAGE_TYPE_NAMES = {
    "BRIGHTFIELD_H_E": "Brightfield (H&E)",
    "BRIGHTFIELD_H_DAB": "Brightfield (H-DAB)",
    "BRIGHTFIELD_OTHER": "Brightfield (other)",
    "FLUORESCENCE": "Fluorescence",
    "OTHER": "Other",
    "UNSET": "Not set",
}


def direct_state_summary(viewer: Any) -> str:
    st = viewer.state()
    if not st["image_open"]:
        return "No image is open in the viewer."
    w, h = st["dimensions"]
    x0, y0, x1, y1 = st["visible_region"]
    mpp = f"{st['mpp'][0]:.4g} µm/px at full resolution" if st["mpp"] else "pixel size unknown"
    mag = f"{st['magnification']:.2f}x" if st["magnification"] is not None else "unknown (no pixel size)"
    frac = max(0.0, min(x1, w) - max(x0, 0)) * max(0.0, min(y1, h) - max(y0, 0)) / (w * h)
    return "\n".join(
        [
            f"- Image: {field('file name', st['image'], 128)} ({w} x {h} px, {st['levels']} pyramid levels, {mpp})",
            f"- Image type: {IMAGE_TYPE_NAMES.get(st['image_type'], st['image_type'])}",
            f"- Viewer centre (full-resolution px): x={st['center'][0]:.1f}, y={st['center'][1]:.1f}",
            f"- Downsample: {st['downsample']:.4g} (pyramid level {st['pyramid_level']}); magnification: {mag}",
            f"- Visible region (full-resolution px): x {x0:.0f}..{x1:.0f}, y {y0:.0f}..{y1:.0f} "
            f"({100 * frac:.1f}% of the image area)",
        ]
    )


def gui_state_summary(viewer: Any) -> str:
    st = viewer.state()
    lines = ["- Window: viewer in the foreground; navigation tool: Move"]
    if not st["image_open"]:
        return "\n".join([*lines, "- Viewer: empty", f"- Last action: {st['last_action']}"])
    vw, vh = st["viewer_size"]
    return "\n".join(
        [
            *lines,
            f"- Viewer: {vw} x {vh} px screenshot; points are given as x, y in 0..999 from its top-left corner",
            "- Overlays: overview thumbnail (top right, red box = visible region), scale bar (bottom left), "
            "magnification label (top left); points on overlays do not address tissue",
            f"- Last action: {st['last_action']}",
        ]
    )
