"""A retrieved instance's header read straight from its bytes, for the common case only: a Part 10 file in
Implicit or Explicit VR Little Endian with uncompressed single-frame greyscale pixels whose stored bits fill their
allocation. It gives what checking and showing the instance need (its UIDs, the pixel module, rescale, window,
spacing and instance number) and its pixels as a view of the bytes, at a small fraction of a full parse; for
anything else (`scan` returns None) the instance is read with pydicom as before."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

EXPLICIT_LE, IMPLICIT_LE = "1.2.840.10008.1.2.1", "1.2.840.10008.1.2"
PIXEL_DATA = 0x7FE00010
LONG_VRS = frozenset({b"OB", b"OD", b"OF", b"OL", b"OV", b"OW", b"SQ", b"SV", b"UC", b"UN", b"UR", b"UT", b"UV"})
UNDEFINED = 0xFFFFFFFF
ITEM, ITEM_END, SEQUENCE_END = 0xFFFEE000, 0xFFFEE00D, 0xFFFEE0DD
_TAG_LENGTH, _TAG = struct.Struct("<HHI"), struct.Struct("<HH")
_VR_SHORT, _LONG = struct.Struct("<2sH"), struct.Struct("<I")
# the elements read (tag: attribute, kind); all others are skipped unread
WANTED: dict[int, tuple[str, str]] = {
    0x00080018: ("SOPInstanceUID", "UI"), 0x0020000E: ("SeriesInstanceUID", "UI"),
    0x00200013: ("InstanceNumber", "IS"), 0x00280002: ("SamplesPerPixel", "US"),
    0x00280008: ("NumberOfFrames", "IS"), 0x00280010: ("Rows", "US"), 0x00280011: ("Columns", "US"),
    0x00280030: ("PixelSpacing", "DS"), 0x00280100: ("BitsAllocated", "US"), 0x00280101: ("BitsStored", "US"),
    0x00280103: ("PixelRepresentation", "US"), 0x00281050: ("WindowCenter", "DS"),
    0x00281051: ("WindowWidth", "DS"), 0x00281052: ("RescaleIntercept", "DS1"), 0x00281053: ("RescaleSlope", "DS1"),
}  # fmt: skip
GREY = 1  # SamplesPerPixel of a greyscale image


class NotPlain(Exception):
    """The instance is not of the common kind this reader handles (it is then read in full)."""


class InstanceHeader:
    """What a scan found: the attributes named as pydicom names them (None when absent) and the pixel bytes."""

    SOPInstanceUID: str
    SeriesInstanceUID: str
    InstanceNumber: int | None
    NumberOfFrames: int | None
    Rows: int
    Columns: int
    BitsAllocated: int
    PixelRepresentation: int
    PixelSpacing: list[float] | None
    WindowCenter: list[float] | None
    WindowWidth: list[float] | None
    RescaleIntercept: float | None
    RescaleSlope: float | None

    def __init__(self, content: bytes, values: dict[str, Any], pixel_at: int, pixel_length: int) -> None:
        for name, _ in WANTED.values():
            setattr(self, name, values.get(name))
        self.SOPInstanceUID = values.get("SOPInstanceUID") or ""
        self.SeriesInstanceUID = values.get("SeriesInstanceUID") or ""
        self.filename: str | None = None
        self._content, self.pixel_at, self.pixel_length = content, pixel_at, pixel_length

    @property
    def cut_short(self) -> bool:
        """Whether the pixel data runs past the end of the bytes received."""
        return self.pixel_at + self.pixel_length > len(self._content)

    def raw_pixels(self) -> np.ndarray:
        """The pixels (rows × columns), a view of the received bytes."""
        kind = "i" if self.PixelRepresentation else "u"
        dtype = np.dtype(f"<{kind}{self.BitsAllocated // 8}")
        count = self.Rows * self.Columns
        return np.frombuffer(self._content, dtype, count, self.pixel_at).reshape(self.Rows, self.Columns)


def _number(raw: bytes, kind: str) -> Any:
    """A value as pydicom would give it: US an int, UI a str, IS an int, DS1 its first float, DS a list."""
    if kind == "US":
        if len(raw) < 2:
            raise NotPlain
        return int.from_bytes(raw[:2], "little")
    text = raw.decode("latin-1").strip("\0 ")
    if kind == "UI":
        return text
    parts = [p.strip() for p in text.split("\\") if p.strip()]
    try:
        if kind == "IS":
            return int(parts[0]) if parts else None
        numbers = [float(p) for p in parts]
    except ValueError:
        raise NotPlain from None
    if not numbers:
        return None
    return numbers[0] if kind == "DS1" else numbers


def _skip_items(data: bytes, pos: int, explicit: bool) -> int:
    """Past an undefined-length sequence starting at `pos` (its items, nested ones too); where it ends."""
    end = len(data)
    while True:
        if pos + 8 > end:
            raise NotPlain
        group, element, length = _TAG_LENGTH.unpack_from(data, pos)
        tag = group << 16 | element
        pos += 8
        if tag == SEQUENCE_END:
            return pos
        if tag != ITEM:
            raise NotPlain
        pos = pos + length if length != UNDEFINED else _elements(data, pos, explicit, None, nested=True)[0]


def _elements(data: bytes, pos: int, explicit: bool, found: dict[str, Any] | None, nested: bool = False) -> tuple[
    int, int, int
]:  # fmt: skip
    """Walk a dataset's elements from `pos`, reading the WANTED ones into `found` (the top level only); (where it
    ended, where the pixel data's value starts, its length), the pixel data -1 when absent."""
    end = len(data)
    while pos < end:
        if pos + 8 > end:
            raise NotPlain
        group, element = _TAG.unpack_from(data, pos)
        tag = group << 16 | element
        if group == 0xFFFE:
            if not nested or tag != ITEM_END:
                raise NotPlain
            return pos + 8, -1, 0
        if explicit and group != 0xFFFE:
            vr, length = _VR_SHORT.unpack_from(data, pos + 4)
            if vr in LONG_VRS:
                if pos + 12 > end:
                    raise NotPlain
                (length,) = _LONG.unpack_from(data, pos + 8)
                pos += 12
            else:
                pos += 8
        else:
            (length,) = _LONG.unpack_from(data, pos + 4)
            vr = b"SQ" if length == UNDEFINED else b""
            pos += 8
        if tag == PIXEL_DATA and not nested:
            if length == UNDEFINED:
                raise NotPlain  # encapsulated
            return pos + length, pos, length
        if length == UNDEFINED:
            if vr != b"SQ":
                raise NotPlain
            pos = _skip_items(data, pos, explicit)
            continue
        if pos + length > end:
            raise NotPlain
        if found is not None and not nested and tag in WANTED:
            name, kind = WANTED[tag]
            found[name] = _number(data[pos : pos + length], kind)
        pos += length
    if nested:
        raise NotPlain
    return pos, -1, 0


def _meta(data: bytes) -> tuple[str, int]:
    """The transfer syntax and where the dataset starts, from the Part 10 preamble and file meta group."""
    if len(data) < 144 or data[128:132] != b"DICM":
        raise NotPlain
    pos, syntax = 132, ""
    while pos + 8 <= len(data):
        group, element = _TAG.unpack_from(data, pos)
        if group != 0x0002:
            return syntax, pos
        vr, length = _VR_SHORT.unpack_from(data, pos + 4)
        if vr in LONG_VRS:
            (length,) = _LONG.unpack_from(data, pos + 8)
            pos += 12
        else:
            pos += 8
        if length == UNDEFINED or pos + length > len(data):
            raise NotPlain
        if element == 0x0010:
            syntax = data[pos : pos + length].decode("latin-1").strip("\0 ")
        pos += length
    raise NotPlain


def scan(data: bytes) -> InstanceHeader | None:
    """The header of a plain instance (see the module's docstring), or None for anything else."""
    try:
        syntax, pos = _meta(data)
        if syntax not in (EXPLICIT_LE, IMPLICIT_LE):
            return None
        found: dict[str, Any] = {}
        _, pixel_at, pixel_length = _elements(data, pos, syntax == EXPLICIT_LE, found)
    except (NotPlain, struct.error, UnicodeDecodeError):
        return None
    bits, stored = found.get("BitsAllocated"), found.get("BitsStored")
    frames = found.get("NumberOfFrames")
    if pixel_at < 0 or bits not in (8, 16) or stored != bits or found.get("SamplesPerPixel", GREY) != GREY:
        return None
    if frames not in (None, 1) or not found.get("Rows") or not found.get("Columns"):
        return None
    if found.get("PixelRepresentation") not in (0, 1):
        return None
    if pixel_length < found["Rows"] * found["Columns"] * bits // 8:
        return None  # odd: left to the full read (which judges a cut-short file by its declared length)
    return InstanceHeader(data, found, pixel_at, pixel_length)
