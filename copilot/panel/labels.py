"""Where evidence labels go on a pane (Qt-free): each label beside its point, never over another label nor over
any finding's marker, inside the pane when it fits. Greedy: candidate places around the point, nearest first,
then further out; the first free one wins (a label that fits nowhere goes to its least crowded candidate)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MARKER_RADIUS = 9.0  # the finding's ring as the slice panes draw it (device-independent logical pixels)
GAP = 7.0  # clear of the ring and its ticks


@dataclass(frozen=True)
class Box:
    """An axis-aligned box: left, top, width, height."""

    x: float
    y: float
    w: float
    h: float

    def overlaps(self, other: Box) -> bool:
        return self.x < other.x + other.w and other.x < self.x + self.w and self.y < other.y + other.h and \
            other.y < self.y + self.h  # fmt: skip

    def overlap_area(self, other: Box) -> float:
        dx = min(self.x + self.w, other.x + other.w) - max(self.x, other.x)
        dy = min(self.y + self.h, other.y + other.h) - max(self.y, other.y)
        return max(0.0, dx) * max(0.0, dy)

    def inside(self, width: float, height: float) -> bool:
        return self.x >= 0 and self.y >= 0 and self.x + self.w <= width and self.y + self.h <= height


def rough_size(text: str, char_w: float = 6.5, line_h: float = 13.0) -> tuple[float, float]:
    """A label's size when no font can measure it (tests, headless): a fixed width per character."""
    return len(text) * char_w, line_h


def _candidates(x: float, y: float, w: float, h: float, r: float) -> list[Box]:
    """Places around a point: right, left, above, below and the corners, at growing distances."""
    out = []
    for step in range(6):
        d = r + GAP + step * (h + 2)
        out += [
            Box(x + d, y - h / 2, w, h),  # right, level with the point
            Box(x + d, y - d - h, w, h),  # upper right
            Box(x + d, y + d, w, h),  # lower right
            Box(x - d - w, y - h / 2, w, h),  # left
            Box(x - d - w, y - d - h, w, h),  # upper left
            Box(x - d - w, y + d, w, h),  # lower left
            Box(x - w / 2, y - d - h, w, h),  # above
            Box(x - w / 2, y + d, w, h),  # below
        ]
    return out


def place_labels(
    points: list[tuple[float, float]], texts: list[str], width: float, height: float,
    measure: Callable[[str], tuple[float, float]] = rough_size, radius: float = MARKER_RADIUS,
    fixed: list[Box] | None = None,
) -> list[Box | None]:  # fmt: skip
    """A box per label (None for an empty text) beside its point, clear of the other labels, of every point's
    marker ring (radius `radius`) and of the `fixed` boxes (labels drawn elsewhere), inside width×height when it
    can be."""
    rings = [Box(px - radius - 1, py - radius - 1, 2 * radius + 2, 2 * radius + 2) for px, py in points]
    rings += list(fixed or [])
    placed: list[Box] = []
    out: list[Box | None] = []
    for (px, py), text in zip(points, texts, strict=True):
        if not text:
            out.append(None)
            continue
        w, h = measure(text)
        options = _candidates(px, py, w, h, radius)
        taken = placed + rings

        def crowding(b: Box, taken: list[Box] = taken) -> float:
            return sum(b.overlap_area(t) for t in taken) + (0.0 if b.inside(width, height) else 1e6)

        chosen = next((b for b in options if b.inside(width, height) and not any(b.overlaps(t) for t in taken)),
                      None) or min(options, key=crowding)  # fmt: skip
        placed.append(chosen)
        out.append(chosen)
    return out
