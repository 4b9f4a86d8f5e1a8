"""A PACS study opened while it arrives: the retrieval runs on a background thread, the first image series'
slices fill a stack in instance order as they come (the desktop shows them and refreshes as each lands), and
whoever needs the whole study (a session, the agent's tools) calls `wait()`, which returns only once every
series is complete in the cache, raises the retrieval's own named refusal when it failed midway (the cache then
holds no entry marked complete), or `pacs_not_ready` when its timeout passes first."""

from __future__ import annotations

import io
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from copilot.pacs.cache import PacsCache
from copilot.pacs.errors import PacsError
from copilot.pacs.fetch import LocalStudy, fetch
from copilot.pacs.header import InstanceHeader, scan
from copilot.pacs.limits import PacsLimits


def _raw_pixels(ds: Any) -> np.ndarray | None:
    """The pixels of an uncompressed single-frame greyscale instance whose stored bits fill their allocation,
    straight from its bytes (pydicom's pixel handlers cost milliseconds a slice); None for anything else."""
    from pydicom.uid import UID

    meta = getattr(ds, "file_meta", None)
    syntax = UID(str(getattr(meta, "TransferSyntaxUID", "")))
    bits, stored = int(getattr(ds, "BitsAllocated", 0) or 0), int(getattr(ds, "BitsStored", 0) or 0)
    if not syntax or syntax.is_compressed or syntax.is_deflated or bits not in (8, 16) or stored != bits:
        return None
    if int(getattr(ds, "SamplesPerPixel", 1) or 1) != 1 or int(getattr(ds, "NumberOfFrames", 1) or 1) != 1:
        return None
    rows, cols = int(ds.Rows), int(ds.Columns)
    kind = "i" if int(getattr(ds, "PixelRepresentation", 0) or 0) else "u"
    dtype = np.dtype(f"{'<' if syntax.is_little_endian else '>'}{kind}{bits // 8}")
    data = ds.PixelData
    return np.frombuffer(data, dtype, rows * cols).reshape(rows, cols) if len(data) >= rows * cols * bits // 8 \
        else None  # fmt: skip


def _modality_values(ds: Any) -> np.ndarray | None:
    """One single-frame instance's pixels as modality values (rescale applied), or None: int32 when the pixels
    are integers rescaled by whole numbers (the same values, without a round trip through floats), else float32."""
    try:
        pixels = ds.raw_pixels() if isinstance(ds, InstanceHeader) else _raw_pixels(ds)
        if pixels is None:
            pixels = ds.pixel_array
    except Exception:  # compressed without a decoder, or damaged: the viewer judges it later
        return None
    if pixels.ndim != 2:
        return None
    slope, intercept = float(getattr(ds, "RescaleSlope", 1) or 1), float(getattr(ds, "RescaleIntercept", 0) or 0)
    exact = abs(slope) * 65536 + abs(intercept) < 2**24  # the values are exact in float32 too
    if pixels.dtype.kind in "iu" and pixels.itemsize <= 2 and slope.is_integer() and intercept.is_integer() and exact:
        values = pixels.astype(np.int32)
        if slope != 1:
            values *= int(slope)
        values += int(intercept)
        return values
    return np.asarray(pixels, np.float32) * slope + intercept


def _window(ds: Any, values: np.ndarray) -> tuple[float, float]:
    """The display window (low, high): the instance's own first window, else its 1st to 99th percentile."""
    try:
        center = float(np.ravel([ds.WindowCenter])[0])
        width = float(np.ravel([ds.WindowWidth])[0])
        if width > 0:
            return center - width / 2, center + width / 2
    except (AttributeError, TypeError, ValueError, IndexError):
        pass
    low, high = np.percentile(values, [1, 99])
    return float(low), float(max(high, low + 1))


def _aspect(ds: Any) -> float:
    """The height of a pixel in widths (PixelSpacing is row spacing, then column spacing), 1 when unknown."""
    try:
        rows, cols = (float(v) for v in ds.PixelSpacing)
        return rows / cols if rows > 0 and cols > 0 else 1.0
    except (AttributeError, TypeError, ValueError):
        return 1.0


def _read(path: Path) -> Any:
    """A cached instance for the stack: its header read at a glance when it is plain, else by pydicom."""
    content = path.read_bytes()
    header = scan(content)
    if header is not None:
        return header
    import pydicom

    return pydicom.dcmread(io.BytesIO(content))


class SliceStack:
    """The slices of one series as they arrive, in instance order: a (slices, rows, columns) array of modality
    values (int16 when the first slice's are whole numbers that fit), which slices are filled, the slice on show
    (`current`: the first to arrive until scrolled) and a `version` that grows with each change; `listeners` hear
    each slice's position (from the retrieving thread)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.filled = np.zeros(total, bool)
        self.volume: np.ndarray | None = None
        self.window = (0.0, 1.0)
        self.aspect = 1.0  # the height of a pixel in widths
        self.current: int | None = None
        self.version = 0
        self.listeners: list[Callable[[int], None]] = []
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        return int(self.filled.sum())

    def put(self, position: int, ds: Any) -> bool:
        """Place an instance's pixels at its position; False (not shown) for a multi-frame instance or one whose
        size differs from the first."""
        values = _modality_values(ds)
        if values is None or not 0 <= position < self.total:
            return False
        with self._lock:
            if self.volume is None:
                integral = values.dtype == np.int32 or bool(np.all(values == np.round(values)))
                whole = integral and values.min() >= -32768 and values.max() <= 32767
                self.volume = np.zeros((self.total, *values.shape), np.int16 if whole else np.float32)
                self.window = _window(ds, values)
                self.aspect = _aspect(ds)
            if values.shape != self.volume.shape[1:]:
                return False
            if self.volume.dtype == np.int16:
                values = np.clip(values if values.dtype == np.int32 else np.round(values), -32768, 32767)
            position = self._slot(ds, position)
            self.volume[position] = values
            self.filled[position] = True
            if self.current is None:
                self.current = position
            self.version += 1
        for listener in list(self.listeners):
            listener(position)
        return True

    def _slot(self, ds: Any, position: int) -> int:
        """Where a slice goes: its Instance Number's place when that is free (a series streamed in one answer
        comes in the server's order), else the position it came with, else the first free one."""
        try:
            numbered = int(ds.InstanceNumber) - 1
        except (AttributeError, TypeError, ValueError):
            numbered = -1
        for slot in (numbered, position):
            if 0 <= slot < self.total and not self.filled[slot]:
                return slot
        return int(np.argmin(self.filled))

    def scroll(self, step: int) -> int | None:
        """Show the filled slice `step` slices on (or the nearest filled one before it); the slice shown."""
        with self._lock:
            if self.current is None:
                return None
            target = int(np.clip(self.current + step, 0, self.total - 1))
            filled = np.flatnonzero(self.filled)
            self.current = int(filled[np.argmin(np.abs(filled - target))])
            self.version += 1
            return self.current

    def image(self) -> np.ndarray | None:
        """The slice on show as display-ready uint8 (rows × columns), or None before the first arrives."""
        with self._lock:
            if self.volume is None or self.current is None:
                return None
            low, high = self.window
            shown = (self.volume[self.current].astype(np.float32) - low) * (255.0 / (high - low))
            return np.clip(shown, 0, 255).astype(np.uint8)

    def caption(self) -> str:
        """What the preview says under the image."""
        shown = f"slice {self.current + 1} of {self.total}" if self.current is not None else "waiting for slices"
        return f"{shown} · {self.count} of {self.total} arrived"


class ProgressiveStudy:
    """`ProgressiveStudy(url).start()`: the retrieval of a DICOMweb study or series URL in the background; `stack`
    (the first image series' slices, once it is listed), `received`/`expected` counts, `wait(timeout)`."""

    def __init__(self, url: str, cache: PacsCache | None = None) -> None:
        self.url, self.cache = url, cache
        self.stack: SliceStack | None = None
        self.received = self.expected = 0
        self._count = threading.Lock()
        self.result: LocalStudy | None = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self.first_slice_s: float | None = None  # seconds from the start to the first slice shown
        self._shown_series: str | None = None
        self._done = threading.Event()
        self._arrivals: queue.SimpleQueue[tuple[int, Path, Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="pacs-progressive", daemon=True)
        self._decoder = threading.Thread(target=self._decode, name="pacs-slices", daemon=True)

    def start(self) -> ProgressiveStudy:
        self.started = time.monotonic()
        self._decoder.start()
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.result = fetch(self.url, self.cache, self)
        except BaseException as exc:  # handed to whoever waits
            self.error = exc
        finally:
            self._arrivals.put(None)
            self._decoder.join()  # every slice that arrived is in the stack before anyone is told it ended
            self._done.set()

    def _decode(self) -> None:
        """Arrived slices read into the stack off the retrieving threads (which go on reading the network)."""
        while (item := self._arrivals.get()) is not None:
            assert self.stack is not None
            try:  # the dataset as read to check it, else the file read again (at a glance when plain)
                ds = item[2] if item[2] is not None else _read(item[1])
                placed = self.stack.put(item[0], ds)
            except Exception:  # checked when written: only a file removed since could fail here
                continue
            if placed and self.first_slice_s is None:
                self.first_slice_s = time.monotonic() - self.started

    # ----- SeriesProgress -----
    def listed(self, series: str, total: int) -> None:
        self.expected += total
        if self._shown_series is None and total > 0:
            self._shown_series, self.stack = series, SliceStack(total)

    def arrived(self, series: str, position: int, path: Path, dataset: Any = None) -> None:
        with self._count:
            self.received += 1
        if series == self._shown_series and self.stack is not None:
            self._arrivals.put((position, path, dataset))

    # ----- waiting -----
    @property
    def done(self) -> bool:
        return self._done.is_set()

    def finished(self, within: float) -> bool:
        """Whether the retrieval has ended (well or not), waiting at most `within` seconds for it."""
        return self._done.wait(within)

    def wait(self, timeout: float | None = None) -> LocalStudy:
        """The local study once every series is complete; the retrieval's own refusal when it failed (what it
        kept stays marked incomplete), `pacs_not_ready` when `timeout` seconds (default: the retrieval deadline,
        MEDCOPILOT_PACS_RETRIEVAL_S) pass first."""
        limit = PacsLimits.from_env().retrieval_s if timeout is None else timeout
        if not self._done.wait(limit):
            raise PacsError("pacs_not_ready", f"the study is still arriving ({self.received} of {self.expected} "
                            f"instances after {time.monotonic() - self.started:.1f} s)")  # fmt: skip
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result
