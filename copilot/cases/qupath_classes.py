"""QuPath's class colours and object ids, so a written GeoJSON file reads in QuPath as QuPath wrote it.

A class QuPath has not seen before gets the colour QuPath itself would give it (qupath-core PathClass, 0.4+):
the standard classes their fixed colours; Positive/Negative/1+/2+/3+ theirs brightened by 1.25 (derived from
Tumor: fixed; from another class: its colour scaled); any other name a colour drawn from java.util.Random
seeded with the Java hashCode of the class's cache string (its names joined by newlines), very dark draws
rejected. Feature ids are UUIDs as QuPath writes them; an id that is not one becomes a stable UUID derived
from it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

RGB = tuple[int, int, int]
STANDARD = {"Tumor": (200, 0, 0), "Stroma": (150, 200, 150), "Immune cells": (160, 90, 160),
            "Ignore*": (180, 180, 180), "Image": (128, 128, 128), "Necrosis": (50, 50, 50),
            "Other": (255, 200, 0), "Region*": (0, 0, 180)}  # fmt: skip
_INTENSITY = {"Positive": (200, 50, 50), "Negative": (90, 90, 180), "1+": (255, 215, 0), "2+": (225, 150, 50),
              "3+": (200, 50, 50)}  # fmt: skip
_DERIVED_SCALE = {"1+": 0.9, "2+": 0.6, "3+": 0.4, "Positive": 0.75, "Negative": 1.25}
_IDS = uuid.UUID("6f1c1b4e-2d0a-4c55-9e4b-8f3a6d2b7c10")  # namespace of ids derived from non-UUID ids
_MASK48 = (1 << 48) - 1


def _java_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit wrap-around), as a signed int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


class _JavaRandom:
    """java.util.Random's 48-bit linear congruential generator, enough for nextInt(256)."""

    def __init__(self, seed: int) -> None:
        self.seed = (seed ^ 0x5DEECE66D) & _MASK48

    def next_byte(self) -> int:
        """nextInt(256): a power-of-two bound takes the high bits of next(31)."""
        self.seed = (self.seed * 0x5DEECE66D + 0xB) & _MASK48
        return ((self.seed >> 17) * 256) >> 31


def _scaled(rgb: RGB, scale: float) -> RGB:
    r, g, b = (min(255, int(c * scale)) for c in rgb)
    return r, g, b


def _drawn(cache_name: str) -> RGB:
    rng = _JavaRandom(_java_hash(cache_name))
    r = g = b = 0
    while r < 40 and g < 40 and b < 40:
        r, g, b = rng.next_byte(), rng.next_byte(), rng.next_byte()
    return r, g, b


def class_colour(names: Sequence[str]) -> RGB:
    """The colour QuPath gives a new class (a base name, or the names of a derived class in order)."""
    colour: RGB | None = None
    for depth, name in enumerate(names):
        if depth == 0:
            if name in STANDARD:
                colour = STANDARD[name]
            elif name in _INTENSITY:
                colour = _scaled(_INTENSITY[name], 1.25)
            else:
                colour = _drawn(name)
        elif colour is not None and name in _DERIVED_SCALE:
            tumour = depth == 1 and names[0] == "Tumor"
            colour = _INTENSITY[name] if tumour else _scaled(colour, _DERIVED_SCALE[name])
        else:
            colour = _drawn("\n".join(names[: depth + 1]))
    return colour or (64, 64, 64)


def feature_id(object_id: str | None, fallback: str) -> str:
    """A UUID for a feature: its own id when that is one, else a UUID derived from it (or from `fallback`)."""
    try:
        return str(uuid.UUID(str(object_id)))
    except ValueError:
        return str(uuid.uuid5(_IDS, object_id or fallback))
