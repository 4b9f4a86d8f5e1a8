"""Checks a slide file passes before OpenSlide, tiffslide or tifffile parse it: structure, sizes, references.

A TIFF (classic or BigTIFF, either byte order; SVS, NDPI and generic pyramids are TIFF) has its IFD chain
walked here as a graph with a page limit, so a chain that loops or never ends is refused
(`invalid_structure`) instead of spinning a reader forever. Each image directory must declare sizes a
reader can allocate for (`too_large`): tiles at most `MAX_TILE_SIDE` px a side (OpenSlide allocates a whole
tile per read: a 2^20-px tile asks for 4 TiB and aborts the process), strips at most `MAX_STRIP_BYTES`, and
as many tile or strip offsets as the image's dimensions need; data that lies beyond the end of the file is
`truncated_image`. Multi-file formats (MIRAX, Hamamatsu VMS/VMU) have the data files they name listed for
the confinement check (`copilot.engine.confine`).
"""

from __future__ import annotations

import configparser
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from copilot.errors import HandlerError

MAX_PAGES = 2048  # image directories (SubIFDs included) in one file
MAX_ENTRIES = 4096  # tags in one directory
MAX_SIDE = 1 << 24  # pixels along one side of an image (16.7 M: far beyond any scanner)
MAX_TILE_SIDE = 16384  # pixels along one side of a tile
MAX_STRIP_BYTES = 1 << 28  # decoded bytes of one strip
MAX_CHUNKS = 1 << 24  # tiles or strips of one image directory
_TYPES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4, 16: 8, 17: 8, 18: 8}
_INT_FORMATS = {1: "B", 3: "H", 4: "I", 6: "b", 8: "h", 9: "i", 13: "I", 16: "Q", 17: "q", 18: "Q"}
WIDTH, LENGTH, BITS, COMPRESSION, STRIP_OFFSETS, SAMPLES, ROWS_PER_STRIP, STRIP_COUNTS = (
    256,
    257,
    258,
    259,
    273,
    277,
    278,
    279,
)
PLANAR, TILE_WIDTH, TILE_LENGTH, TILE_OFFSETS, TILE_COUNTS, SUB_IFDS = 284, 322, 323, 324, 325, 330


class SlideFileError(HandlerError, ValueError):
    """A slide file refused before any reader parses it (`invalid_structure`, `too_large`, `truncated_image`)."""

    def __init__(self, message: str, code: str = "invalid_structure") -> None:
        HandlerError.__init__(self, code, message)


def is_tiff(path: Path) -> bool:
    """True when the file starts with a TIFF or BigTIFF signature."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return head in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")


class _Reader:
    """Positional reads of TIFF structures with bounds checks against the file size."""

    def __init__(self, fh: BinaryIO, size: int, name: str) -> None:
        self.fh, self.size, self.name = fh, size, name
        head = fh.read(16)
        self.order = "<" if head[:2] == b"II" else ">"
        self.big = struct.unpack(self.order + "H", head[2:4])[0] == 43
        self.first = struct.unpack(self.order + ("Q" if self.big else "I"), head[8:16] if self.big else head[4:8])[0]

    def read(self, offset: int, n: int) -> bytes:
        if offset < 0 or offset + n > self.size:
            raise SlideFileError(
                f"{self.name}: a directory or value lies beyond the end of the file", "truncated_image"
            )
        self.fh.seek(offset)
        return self.fh.read(n)

    def directory(self, offset: int) -> tuple[dict[int, tuple[int, int, int, bytes]], int]:
        """Tags of the directory at `offset` as (type, count, value offset, inline bytes), and the next offset."""
        count_size, entry_size, off_fmt = (8, 20, "Q") if self.big else (2, 12, "I")
        n = struct.unpack(self.order + ("Q" if self.big else "H"), self.read(offset, count_size))[0]
        if n == 0 or n > MAX_ENTRIES:
            raise SlideFileError(f"{self.name}: an image directory with {n} entries")
        raw = self.read(offset + count_size, n * entry_size + struct.calcsize(off_fmt))
        tags: dict[int, tuple[int, int, int, bytes]] = {}
        inline = 8 if self.big else 4
        for i in range(n):
            e = raw[i * entry_size : (i + 1) * entry_size]
            tag, typ = struct.unpack(self.order + "HH", e[:4])
            count = struct.unpack(self.order + ("Q" if self.big else "I"), e[4 : 4 + (8 if self.big else 4)])[0]
            value = e[(12 if self.big else 8) :]
            tags[tag] = (typ, count, struct.unpack(self.order + off_fmt, value)[0], value[:inline])
        nxt = struct.unpack(self.order + off_fmt, raw[n * entry_size :])[0]
        return tags, nxt

    def ints(self, entry: tuple[int, int, int, bytes], limit: int = MAX_CHUNKS) -> np.ndarray:
        """The integer values of a tag (read from the file when they do not fit in the entry)."""
        typ, count, offset, inline = entry
        fmt = _INT_FORMATS.get(typ)
        if fmt is None:
            raise SlideFileError(f"{self.name}: an integer tag of type {typ}")
        if count > limit:
            raise SlideFileError(f"{self.name}: a tag with {count} values", "too_large")
        nbytes = _TYPES[typ] * count
        data = inline[:nbytes] if nbytes <= len(inline) else self.read(offset, nbytes)
        return np.frombuffer(data, dtype=np.dtype(self.order + fmt)).astype(np.int64)


def check_tiff_structure(path: Path) -> int:
    """Walk every image directory of a TIFF; refuse loops, oversized tiles/strips, missing or out-of-file data.

    The directories and their links (next-directory offsets and SubIFDs) form a graph walked depth first: a
    directory reached again by another path (a SubIFD chain that also lists its members, a thumbnail shared by
    two pages) is checked once and is no loop; only a link back to a directory on the current path is.
    Returns the number of image directories.
    """
    size = path.stat().st_size
    with path.open("rb", buffering=0) as raw_fh:
        reader = _Reader(raw_fh, size, path.name)  # type: ignore[arg-type]
        finished: dict[int, bool] = {}  # directory offset → walked to the end (False: on the current path)

        def enter(offset: int) -> tuple[int, Iterator[int]]:
            finished[offset] = False
            if len(finished) > MAX_PAGES:
                raise SlideFileError(f"{path.name}: more than {MAX_PAGES} image directories", "too_large")
            tags, nxt = reader.directory(offset)
            _check_image(reader, tags, len(finished) - 1)
            subs = [int(o) for o in reader.ints(tags[SUB_IFDS], MAX_PAGES)] if SUB_IFDS in tags else []
            return offset, iter([nxt, *subs])

        path_stack = [enter(reader.first)] if reader.first else []
        while path_stack:
            offset, links = path_stack[-1]
            child = next(links, None)
            if child is None:
                finished[offset] = True
                path_stack.pop()
            elif child and child in finished and not finished[child]:
                raise SlideFileError(
                    f"{path.name}: the image directory chain loops (directory at {child} links back to itself)"
                )
            elif child and child not in finished:
                path_stack.append(enter(child))
    if not finished:
        raise SlideFileError(f"{path.name} holds no image", "truncated_image")
    return len(finished)


def has_subifds(path: Path) -> bool:
    """True when a TIFF's first image directory lists SubIFDs (a pyramid OpenSlide's generic TIFF reader skips)."""
    try:
        with path.open("rb") as fh:
            reader = _Reader(fh, path.stat().st_size, path.name)
            return bool(reader.first) and SUB_IFDS in reader.directory(reader.first)[0]
    except (OSError, SlideFileError, struct.error):
        return False


def _one(reader: _Reader, tags: dict[int, tuple[int, int, int, bytes]], tag: int, default: int | None) -> int:
    if tag not in tags:
        if default is None:
            raise SlideFileError(f"{reader.name}: an image directory without tag {tag}")
        return default
    values = reader.ints(tags[tag], 16)
    if values.size == 0:
        raise SlideFileError(f"{reader.name}: tag {tag} has no value")
    return int(values[0])


def _check_image(reader: _Reader, tags: dict[int, tuple[int, int, int, bytes]], page: int) -> None:
    name = f"{reader.name} (page {page})"
    width, length = _one(reader, tags, WIDTH, None), _one(reader, tags, LENGTH, None)
    samples = _one(reader, tags, SAMPLES, 1)
    bits = _one(reader, tags, BITS, 1)
    if not (0 < width <= MAX_SIDE and 0 < length <= MAX_SIDE):
        raise SlideFileError(
            f"{name}: image of {width} × {length} px", "too_large" if width and length else "invalid_structure"
        )
    if not (0 < samples <= 16 and 0 < bits <= 64):
        raise SlideFileError(f"{name}: {samples} samples of {bits} bits")
    planes = samples if _one(reader, tags, PLANAR, 1) == 2 else 1
    pixel_bytes = max(1, samples // planes * bits // 8)
    if TILE_WIDTH in tags or TILE_LENGTH in tags:
        tw, tl = _one(reader, tags, TILE_WIDTH, None), _one(reader, tags, TILE_LENGTH, None)
        if not (0 < tw <= MAX_TILE_SIDE and 0 < tl <= MAX_TILE_SIDE):
            raise SlideFileError(f"{name}: tiles of {tw} × {tl} px (at most {MAX_TILE_SIDE} a side)", "too_large")
        expected = -(-width // tw) * -(-length // tl) * planes
        offsets_tag, counts_tag, what = TILE_OFFSETS, TILE_COUNTS, "tile"
    else:
        rows = min(_one(reader, tags, ROWS_PER_STRIP, length), length)
        if rows <= 0 or rows * width * pixel_bytes > MAX_STRIP_BYTES:
            raise SlideFileError(f"{name}: strips of {rows} rows of {width} px", "too_large")
        expected = -(-length // rows) * planes
        offsets_tag, counts_tag, what = STRIP_OFFSETS, STRIP_COUNTS, "strip"
    if expected > MAX_CHUNKS:
        raise SlideFileError(f"{name}: {expected} {what}s", "too_large")
    if offsets_tag not in tags or counts_tag not in tags:
        raise SlideFileError(f"{name}: no {what} offsets or byte counts")
    offsets, counts = reader.ints(tags[offsets_tag]), reader.ints(tags[counts_tag])
    if offsets.size != expected or counts.size != expected:
        raise SlideFileError(
            f"{name}: {offsets.size} {what} offsets and {counts.size} byte counts for {width} × {length} px "
            f"({expected} {what}s)"
        )
    ends = offsets + counts
    if expected and (int(offsets.min()) < 0 or int(ends.max()) > reader.size):
        raise SlideFileError(
            f"{name} is truncated: image data ends at byte {int(ends.max())} of a {reader.size}-byte file",
            "truncated_image",
        )


def slide_references(path: Path) -> list[str]:
    """The data files a multi-file slide names, relative to the slide file's folder."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".mrxs":
            folder = path.with_suffix("")
            ini = _ini(folder / "Slidedat.ini")
            refs = [folder.name, f"{folder.name}/Slidedat.ini"]
            if ini is not None and ini.has_section("DATAFILE"):
                refs += [f"{folder.name}/{v}" for k, v in ini.items("DATAFILE") if k.lower().startswith("file_")]
            return refs
        if suffix in (".vms", ".vmu"):
            ini = _ini(path)
            if ini is None:
                return []
            return [v for s in ini.sections() for k, v in ini.items(s) if "file" in k.lower() and v.strip()]
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise SlideFileError(f"{path.name}: an unreadable index ({type(exc).__name__})") from None
    return []


def _ini(path: Path) -> configparser.RawConfigParser | None:
    if not path.is_file():
        return None
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    with path.open("rb") as fh:
        parser.read_string(fh.read(1 << 20).decode("utf-8-sig", "replace"))
    return parser
