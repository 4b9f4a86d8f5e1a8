"""Retrieved instances written straight to a series folder as they arrive: each part to a hidden
`.NNNNN.dcm.part-PID` file counted against the cache budget byte by byte, renamed to `NNNNN.dcm` only once its
part is complete and reads as a DICOM file of the series; an instance already held is not stored twice. A whole
series' answer goes through one `SeriesWriter`; each instance retrieved on its own through an `InstanceWriter`."""

from __future__ import annotations

import io
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from copilot.pacs.errors import PacsError
from copilot.pacs.header import scan
from copilot.pacs.printable import printable
from copilot.privatefs import open_private

PART_SUFFIX = ".part-"
IN_MEMORY = 64 * 1024 * 1024  # a part up to this size is also kept in memory, read from there once complete
PIXEL_DATA, UNDEFINED = 0x7FE00010, 0xFFFFFFFF
_INDEX = re.compile(r"^(\d{5,})\.dcm$")


def held_instances(folder: Path) -> dict[str, Path]:
    """The SOP Instance UIDs of the instances a series folder already holds."""
    held: dict[str, Path] = {}
    paths = sorted(folder.glob("*.dcm")) if folder.is_dir() else []
    if paths:
        import pydicom  # only here (and for parts the header reader leaves): a fresh series shows sooner
    for path in paths:
        try:
            ds = pydicom.dcmread(path, stop_before_pixels=True, specific_tags=["SOPInstanceUID"])
            held[str(ds.SOPInstanceUID)] = path
        except Exception:  # a damaged file: removed, so that it is retrieved again
            path.unlink(missing_ok=True)
    return held


def _pixels_cut_short(ds: Any, size: int) -> bool:
    """Whether an uncompressed instance's pixel data runs past the end of its `size` bytes (its framing was
    intact, its content cut). Encapsulated pixel data is not checked (its frames would have to be read)."""
    import pydicom
    from pydicom.dataelem import RawDataElement

    try:
        syntax = pydicom.uid.UID(str(getattr(ds.file_meta, "TransferSyntaxUID", "")))
        if not syntax or syntax.is_compressed or syntax.is_deflated:
            return False
        raw = ds.get_item(PIXEL_DATA, keep_deferred=True)
    except Exception:  # an unusual but readable file: the loaders judge it
        return False
    if not isinstance(raw, RawDataElement) or raw.length == UNDEFINED or raw.value_tell is None:
        return False
    return bool(raw.value_tell + raw.length > size)


def _read_full(path: Path, content: bytes | None) -> Any:
    """A part read by pydicom: from its bytes when held, else from disk with values over 4 KiB left there."""
    import pydicom

    return pydicom.dcmread(io.BytesIO(content)) if content is not None else pydicom.dcmread(path, defer_size=4096)


class PartFile:
    """One part at a time written to a hidden `.NNNNN.dcm.part-PID` file in `folder`, each byte asked of `take`
    (the cache budget, which may refuse: `pacs_cache_full`) before it is written, checked once complete."""

    def __init__(self, folder: Path, series_uid: str, take: Callable[[int], None] | None = None,
                 give: Callable[[int], None] | None = None) -> None:  # fmt: skip
        self.folder, self.series_uid = folder, series_uid
        self.take, self.give = take or (lambda n: None), give or (lambda n: None)
        self._fh: IO[bytes] | None = None
        self._tmp: Path | None = None
        self._bytes = 0
        self._pieces: list[bytes | memoryview] | None = None  # the part's bytes while it fits IN_MEMORY
        self.dataset: Any = None  # the last part kept, as read to check it (a large part's big values left on disk)

    def _open(self, headers: dict[str, str], index: int) -> None:
        kind = headers.get("content-type", "application/dicom").split(";")[0].strip().lower()
        if kind != "application/dicom":
            raise PacsError("pacs_bad_answer", f"the PACS sent a part of type {printable(kind, 60)!r}, not DICOM")
        self._tmp = self.folder / f".{index:05d}.dcm{PART_SUFFIX}{os.getpid()}"
        try:  # created, not truncated (ext4 flushes a file truncated to zero when it is closed)
            self._fh = open_private(self._tmp, "xb")  # owner-only; a link planted in the cache is refused
        except FileExistsError:  # this process's own leftover of an earlier attempt
            self._tmp.unlink()
            self._fh = open_private(self._tmp, "xb")
        self._bytes = 0
        self._pieces = []

    def data(self, chunk: bytes | memoryview) -> None:
        assert self._fh is not None
        self.take(len(chunk))  # before it is held or written: nothing lands past the bound
        self._bytes += len(chunk)
        if self._pieces is None:
            self._fh.write(chunk)
            return
        self._pieces.append(chunk)  # written at once when the part is complete
        if self._bytes > IN_MEMORY:  # too large to hold: streamed to its file from here on
            for piece in self._pieces:
                self._fh.write(piece)
            self._pieces = None

    def _close(self) -> str:
        """The SOP Instance UID of the complete part (checked)."""
        assert self._fh is not None and self._tmp is not None
        pieces, self._pieces = self._pieces, None
        content = b"".join(pieces) if pieces is not None else None
        if content is not None:
            self._fh.write(content)  # one write for a part held whole
        self._fh.close()
        self._fh = None
        return self._check(self._tmp, content)

    def _keep(self, final: Path) -> None:
        """The checked part becomes `final` (where its dataset's deferred values are read from)."""
        assert self._tmp is not None
        self._tmp.rename(final)
        self._tmp = None
        if self.dataset is not None:
            self.dataset.filename = str(final)

    def _check(self, path: Path, content: bytes | None = None) -> str:
        """The SOP Instance UID of a complete part (`content`: its bytes, when held); `pacs_bad_answer` unless it
        is a DICOM file of the series."""
        header = scan(content) if content is not None else None  # the common kind, read at a glance
        try:  # read once, the preamble's DICM required; from memory, else from disk with big values left there
            ds: Any = header if header is not None else _read_full(path, content)
            uid, series = str(ds.SOPInstanceUID), str(ds.SeriesInstanceUID)
        except Exception:
            ds, uid, series = None, "", ""
        if not uid:
            self.discard()
            raise PacsError("pacs_bad_answer", "the PACS sent a part that is not a DICOM file")
        if series != self.series_uid:
            self.discard()
            raise PacsError("pacs_bad_answer", "the PACS sent an instance of another series")
        size = len(content) if content is not None else path.stat().st_size
        if header.cut_short if header is not None else _pixels_cut_short(ds, size):
            self.discard()
            raise PacsError("pacs_truncated", "the PACS sent an instance whose pixel data is shorter than it says")
        self.dataset = ds
        return uid

    def discard(self) -> None:
        """Remove the part being written (a failed or repeated one); its bytes given back to the budget."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._pieces = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self.give(self._bytes)
            self._tmp, self._bytes = None, 0


class SeriesWriter(PartFile):
    """A `PartSink` writing one series' instances into `folder` in the order they come, numbered after those the
    folder already holds; an instance already held is not stored twice."""

    def __init__(self, folder: Path, series_uid: str, take: Callable[[int], None] | None = None,
                 give: Callable[[int], None] | None = None) -> None:  # fmt: skip
        super().__init__(folder, series_uid, take, give)
        self.held = held_instances(folder)
        self.next = next_index(folder)
        self.new = 0
        self.on_instance: Callable[[int, Path, Any], None] | None = None  # each kept: arrival order, file, dataset

    @property
    def count(self) -> int:
        """Instances the folder holds now."""
        return len(self.held)

    def begin(self, headers: dict[str, str]) -> None:
        self._open(headers, self.next)

    def end(self) -> None:
        uid = self._close()
        if uid in self.held:  # sent again (a retried or repeating retrieval): kept once
            self.discard()
            return
        final = self.folder / f"{self.next:05d}.dcm"
        self._keep(final)
        self.held[uid] = final
        self.next += 1
        self.new += 1
        if self.on_instance is not None:
            self.on_instance(len(self.held) - 1, final, self.dataset)


def next_index(folder: Path) -> int:
    """The number after the highest `NNNNN.dcm` a series folder holds (1 for none)."""
    indices = [int(m.group(1)) for p in folder.glob("*.dcm") if (m := _INDEX.match(p.name))]
    return max(indices, default=0) + 1


class InstanceWriter(PartFile):
    """A `PartSink` for the answer to one instance's retrieval: exactly one part, the instance asked for, kept by
    `commit()` (once the whole answer ended properly) as `NNNNN.dcm` (`index`, fixed before it arrives, so files
    follow instance order whatever the arrival order); once `stop` is set the next piece ends it
    (`RetrievalStopped`)."""

    def __init__(self, folder: Path, series_uid: str, sop_uid: str, index: int, take: Callable[[int], None],
                 give: Callable[[int], None], stop: threading.Event | None = None) -> None:  # fmt: skip
        super().__init__(folder, series_uid, take, give)
        self.sop_uid, self.index, self.stop = sop_uid, index, stop
        self.path: Path | None = None

    def begin(self, headers: dict[str, str]) -> None:
        if self._tmp is not None:
            raise PacsError("pacs_bad_answer", "the PACS answered an instance retrieval with more than one part")
        self._open(headers, self.index)

    def data(self, chunk: bytes | memoryview) -> None:
        if self.stop is not None and self.stop.is_set():
            raise RetrievalStopped
        super().data(chunk)

    def end(self) -> None:
        if self._close() != self.sop_uid:
            self.discard()
            raise PacsError("pacs_bad_answer", "the PACS sent another instance than the one asked for")

    def commit(self) -> Path:
        """The checked instance kept under its final name."""
        self.path = self.folder / f"{self.index:05d}.dcm"
        self._keep(self.path)
        return self.path


class RetrievalStopped(Exception):
    """An instance retrieval ended because another one of its series failed."""
