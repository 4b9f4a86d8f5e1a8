"""View layouts of the desktop workstation (Qt-free): which panes a layout shows and where they go.

A pane is a slice view (`red`, `yellow`, `green`), a side-by-side slice view of another volume
(`red:<volume id>`), the 3D view (`3d`), the slide (`viewer`) or one of another kind's own views (the `views`
layout: each as its viewer renders it). Rectangles are in the widget's
logical pixels; renders use device pixels (logical × device pixel ratio), so HiDPI screens get
full-resolution images.
"""

from __future__ import annotations

from dataclasses import dataclass

from copilot.kinds import kinds

LAYOUT_NAMES = ("one_up", "three_up", "four_up", "side_by_side", "slide", "views")
LAYOUT_TITLES = {
    "one_up": "One up",
    "three_up": "Three up",
    "four_up": "2×2 with 3D",
    "side_by_side": "Side by side (longitudinal)",
    "slide": "Slide",
    "views": "Views",
}
VIEW_TITLES = {"red": "Axial", "yellow": "Sagittal", "green": "Coronal", "3d": "3D", "viewer": "Slide"}


@dataclass(frozen=True)
class Rect:
    x: int
    y: int
    w: int
    h: int

    def contains(self, px: float, py: float) -> bool:
        return self.x <= px < self.x + self.w and self.y <= py < self.y + self.h


def panes(
    layout: str, focus: str = "red", pair: tuple[str, str] | None = None, views: tuple[str, ...] = ()
) -> list[str]:
    """Panes shown by a layout, in reading order; `focus` is the one-up view, `pair` the side-by-side volumes,
    `views` the kind's own views (the `views` layout)."""
    if layout == "one_up":
        return [focus]
    if layout == "three_up":
        return ["red", "yellow", "green"]
    if layout == "four_up":
        return ["red", "3d", "yellow", "green"]
    if layout == "side_by_side":
        if pair is None:
            raise ValueError("side_by_side needs two volumes")
        return [f"{focus}:{pair[0]}", f"{focus}:{pair[1]}"]
    if layout == "slide":
        return ["viewer"]
    if layout == "views":
        return list(views)
    raise ValueError(f"unknown layout {layout!r}; layouts: {LAYOUT_NAMES}")


def arrange(layout: str, width: int, height: int, count: int, gap: int = 2) -> list[Rect]:
    """Rectangles of a layout's panes filling a width×height area (three-up: one row, or a column when the
    area is much taller than wide; four-up: 2×2)."""
    if count <= 0 or width <= 0 or height <= 0:
        return []
    if layout == "four_up":
        cols, rows = 2, 2
    elif width >= height * 0.75:
        cols, rows = count, 1
    else:
        cols, rows = 1, count
    cw, ch = (width - gap * (cols - 1)) // cols, (height - gap * (rows - 1)) // rows
    out = []
    for n in range(count):
        r, c = divmod(n, cols)
        out.append(Rect(c * (cw + gap), r * (ch + gap), max(1, cw), max(1, ch)))
    return out


def device_size(w: int, h: int, ratio: float) -> tuple[int, int]:
    """Render size in device pixels for a pane of w×h logical pixels."""
    return max(1, round(w * ratio)), max(1, round(h * ratio))


def default_layout(kind: str, module: str, volume_names: list[str]) -> str:
    """The layout a case opens in: its benchmark module's (longitudinal pairs side by side, PET/CT with the 3D
    view), else its viewer kind's (slides alone, three slice views); side by side needs a prior/current pair."""
    from copilot.medflow.registry import find  # the module declarations load when a case opens, not at start-up

    wanted = m.layout if (m := find(module)) is not None else None
    if wanted == "side_by_side" and longitudinal_pair(volume_names) is None:
        wanted = None
    return wanted or (k.layout if (k := kinds().get(kind)) is not None else "three_up")


def longitudinal_pair(names: list[str]) -> tuple[str, str] | None:
    """(prior, current) names of a longitudinal case: the same sequence at two time points."""
    old = [n for n in names if n.upper().startswith(("OLD_", "PRIOR_", "BASELINE_"))]
    for prior in old:
        seq = prior.split("_", 1)[1]
        current = next((n for n in names if n.upper().startswith(("CURRENT_", "FOLLOWUP_")) and n.split("_", 1)[1]
                        == seq), None)  # fmt: skip
        if current is not None:
            return prior, current
    return None
