"""Whether an answer's evidence item restates one already listed (Qt-free): an answer often states again the point,
distance or key slice the model recorded a moment before, rounded; that item is drawn and listed once. A point is
the same place as any recorded item at its RAS (a point, a point's measurement) within `POINT_MM`; a distance as
one whose two ends are (either way round); a key slice as one of the same view within `OFFSET_MM`."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

POINT_MM = 1.0  # an answer rounds its coordinates to a tenth of a mm or so; two findings are further apart
OFFSET_MM = 0.5


def _ras(item: Any) -> list[float] | None:
    if not isinstance(item, dict):
        return None
    ras = item.get("ras")
    if isinstance(ras, list | tuple) and len(ras) == 3:
        try:
            return [float(v) for v in ras]
        except (TypeError, ValueError):
            return None
    return None


def _near(a: list[float] | None, b: list[float] | None) -> bool:
    return a is not None and b is not None and math.dist(a, b) <= POINT_MM


def same_place(item: dict[str, Any], other: dict[str, Any]) -> bool:
    """`item` (an answer's) points where `other` does, by the rules above."""
    kind = item.get("kind")
    if kind == "point":
        return other.get("kind") != "distance" and _near(_ras(item), _ras(other))
    if kind == "distance" and other.get("kind") == "distance":
        a, b = _ras(item.get("a")), _ras(item.get("b"))
        c, d = _ras(other.get("a")), _ras(other.get("b"))
        return (_near(a, c) and _near(b, d)) or (_near(a, d) and _near(b, c))
    if kind == "key_slice" and other.get("kind") == "key_slice" and item.get("view") == other.get("view"):
        try:
            return abs(float(item["offset_mm"]) - float(other["offset_mm"])) <= OFFSET_MM
        except (KeyError, TypeError, ValueError):
            return False
    if kind == "wsi_point" and other.get("kind") == "wsi_point":
        return item.get("point") == other.get("point")
    return False


def restates(item: dict[str, Any], listed: Iterable[dict[str, Any]]) -> bool:
    """`item` points where one of `listed` does."""
    return any(same_place(item, other) for other in listed)


def unrestated(items: Iterable[dict[str, Any]], listed: Iterable[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """`items` without those restating one of `listed` or an earlier one of `items`, in order."""
    kept: list[dict[str, Any]] = []
    before = list(listed)
    for item in items:
        if not restates(item, before + kept):
            kept.append(item)
    return kept
