"""The few attributes a first image needs from a DICOM file, parsed with the standard library up to the pixel data:
series, position, orientation, pixel layout, rescale and window. Little-endian uncompressed files only (implicit or
explicit VR); anything else is None, and the full reader (pydicom) opens it later.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

IMPLICIT, EXPLICIT = "1.2.840.10008.1.2", "1.2.840.10008.1.2.1"
LONG_VRS = {b"OB", b"OD", b"OF", b"OL", b"OV", b"OW", b"SQ", b"SV", b"UC", b"UN", b"UR", b"UT", b"UV"}
UNDEFINED = 0xFFFFFFFF
ITEM, ITEM_END, SEQUENCE_END = (0xFFFE, 0xE000), (0xFFFE, 0xE00D), (0xFFFE, 0xE0DD)
PIXEL_DATA = (0x7FE0, 0x0010)
WANTED = {
    (0x0020, 0x000E): "series_uid", (0x0020, 0x0032): "position", (0x0020, 0x0037): "orientation",
    (0x0028, 0x0002): "samples", (0x0028, 0x0004): "photometric", (0x0028, 0x0008): "frames",
    (0x0028, 0x0010): "rows", (0x0028, 0x0011): "columns", (0x0028, 0x0030): "spacing",
    (0x0028, 0x0100): "bits", (0x0028, 0x0103): "signed", (0x0028, 0x1050): "centre", (0x0028, 0x1051): "width",
    (0x0028, 0x1052): "intercept", (0x0028, 0x1053): "slope",
}  # fmt: skip
HEAD_BYTES = 1 << 16  # most headers end within this; a longer one is read whole


class _Short(Exception):
    """The buffer ends inside the header."""


@dataclass
class DicomHeader:
    """What the first image needs of one DICOM file."""

    path: Path
    values: dict[str, bytes] = field(default_factory=dict)
    pixel_offset: int | None = None
    pixel_length: int = 0

    def _text(self, name: str, default: str = "") -> str:
        return self.values.get(name, default.encode()).decode("ascii", "replace").strip(" \0")

    def _numbers(self, name: str, default: str) -> list[float]:
        return [float(v) for v in (self._text(name) or default).split("\\") if v.strip()]

    def _us(self, name: str, default: int) -> int:
        raw = self.values.get(name)
        return struct.unpack("<H", raw[:2])[0] if raw and len(raw) >= 2 else default

    @property
    def series_uid(self) -> str:
        return self._text("series_uid")

    @property
    def position(self) -> np.ndarray:
        return np.array([*self._numbers("position", "0\\0\\0"), 0.0, 0.0, 0.0][:3])

    @property
    def orientation(self) -> list[float]:
        values = self._numbers("orientation", "1\\0\\0\\0\\1\\0")
        return values if len(values) == 6 else [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]

    @property
    def spacing(self) -> tuple[float, float]:
        """(row spacing, column spacing) in mm."""
        values = [v for v in self._numbers("spacing", "1\\1") if v > 0]
        return (values[0], values[1]) if len(values) == 2 else (1.0, 1.0)

    @property
    def frames(self) -> int:
        return int(float(self._text("frames") or 1))

    @property
    def window(self) -> tuple[float, float] | None:
        """The first stored window (centre, width) in rescaled units, or None."""
        centre, width = self._numbers("centre", ""), self._numbers("width", "")
        return (centre[0], width[0]) if centre and width else None

    def pixels(self) -> np.ndarray | None:
        """The rescaled grey pixel values (rows × columns), or None for a layout this reader leaves to pydicom."""
        rows, cols, bits = self._us("rows", 0), self._us("columns", 0), self._us("bits", 16)
        if self.pixel_offset is None or self._us("samples", 1) != 1 or bits not in (8, 16) or rows * cols == 0:
            return None
        dtype = np.dtype(("<i" if self._us("signed", 0) else "<u") + str(bits // 8))
        size = rows * cols * dtype.itemsize
        with open(self.path, "rb") as fh:
            fh.seek(self.pixel_offset)
            data = fh.read(size)
        if len(data) < size:
            return None
        values = np.frombuffer(data, dtype).reshape(rows, cols).astype(np.float32)
        slope, intercept = (self._numbers("slope", "1") or [1.0])[0], (self._numbers("intercept", "0") or [0.0])[0]
        values = values * slope + intercept
        if self._text("photometric") == "MONOCHROME1":
            values = values.max() + values.min() - values
        return values


def read_header(path: Path) -> DicomHeader | None:
    """The header of a little-endian uncompressed DICOM file, or None (not DICOM, or another transfer syntax)."""
    try:
        with open(path, "rb") as fh:
            buf = fh.read(132)  # the preamble and its mark first: other files cost one small read
            if buf[128:132] != b"DICM":
                return None
            buf += fh.read(HEAD_BYTES)
            try:
                return _parse(path, buf)
            except _Short:
                return _parse(path, buf + fh.read())
    except (OSError, struct.error, _Short, ValueError):
        return None


def _parse(path: Path, buf: bytes) -> DicomHeader | None:
    header = DicomHeader(path)
    meta: dict[tuple[int, int], bytes] = {}
    pos = _elements(buf, 132, True, meta, only_group=0x0002)
    syntax = meta.get((0x0002, 0x0010), b"").decode("ascii", "replace").strip(" \0")
    if syntax not in (IMPLICIT, EXPLICIT):
        return None
    found: dict[tuple[int, int], bytes] = {}
    _elements(buf, pos, syntax == EXPLICIT, found, header=header)
    header.values = {WANTED[tag]: value for tag, value in found.items() if tag in WANTED}
    return header


def _element(buf: bytes, pos: int, explicit: bool) -> tuple[tuple[int, int], int, int, bool]:
    """The tag, value start, value length and whether it is a sequence, of the element at `pos`."""
    if pos + 8 > len(buf):
        raise _Short
    group, elem = struct.unpack_from("<HH", buf, pos)
    if group == 0xFFFE:  # item and delimiters: no VR
        return (group, elem), pos + 8, struct.unpack_from("<I", buf, pos + 4)[0], False
    if explicit:
        vr = buf[pos + 4 : pos + 6]
        if vr in LONG_VRS:
            if pos + 12 > len(buf):
                raise _Short
            return (group, elem), pos + 12, struct.unpack_from("<I", buf, pos + 8)[0], vr == b"SQ"
        return (group, elem), pos + 8, struct.unpack_from("<H", buf, pos + 6)[0], False
    length = struct.unpack_from("<I", buf, pos + 4)[0]
    return (group, elem), pos + 8, length, length == UNDEFINED


def _elements(
    buf: bytes, pos: int, explicit: bool, found: dict[tuple[int, int], bytes], only_group: int | None = None,
    header: DicomHeader | None = None,
) -> int:  # fmt: skip
    """Walk elements from `pos` (sequences skipped item by item), keeping top-level values in `found`; stop at the
    pixel data (its offset noted in `header`), at another group than `only_group`, or at the end."""
    while pos < len(buf):
        if only_group is not None and (pos + 2 > len(buf) or struct.unpack_from("<H", buf, pos)[0] != only_group):
            return pos
        tag, start, length, sequence = _element(buf, pos, explicit)
        if tag == PIXEL_DATA and header is not None:
            if length != UNDEFINED:
                header.pixel_offset, header.pixel_length = start, length
            return start
        if sequence:
            pos = _skip(buf, start, length, explicit, SEQUENCE_END)
            continue
        if start + length > len(buf):
            raise _Short
        found[tag] = buf[start : start + length]
        pos = start + length
    if header is not None:
        raise _Short  # the pixel data lies further on
    return pos


def _skip(buf: bytes, start: int, length: int, explicit: bool, end: tuple[int, int]) -> int:
    """The position after a sequence or item (of defined length, or up to its delimiter)."""
    if length != UNDEFINED:
        if start + length > len(buf):
            raise _Short
        return start + length
    pos = start
    while True:
        tag, value, item_length, _ = _element(buf, pos, explicit)
        if tag == end:
            return value
        if tag == ITEM:
            pos = _skip(buf, value, item_length, explicit, ITEM_END)
        else:  # an element inside an item of undefined length (a nested sequence skipped whole)
            _, value, item_length, sequence = _element(buf, pos, explicit)
            if sequence:
                pos = _skip(buf, value, item_length, explicit, SEQUENCE_END)
            elif value + item_length > len(buf):
                raise _Short
            else:
                pos = value + item_length
