"""A WADO-RS `multipart/related` answer parsed as it arrives: each part handed to a sink piece by piece, its
size bounded, its announced Content-Length checked, and the closing boundary required (no closing boundary:
the answer was cut short). Part bodies are never copied: boundaries are found in the pieces as they came and the
sink gets views of them; only a boundary line or a part's headers split across pieces are joined."""

from __future__ import annotations

from typing import Protocol

from copilot.pacs.errors import PacsError
from copilot.pacs.printable import printable

MAX_PADDING = 256
NEED_MORE = -1


class PartSink(Protocol):
    """Receives the parts of a multipart answer (`data` gets read-only views valid as long as the sink keeps them)."""

    def begin(self, headers: dict[str, str]) -> None: ...

    def data(self, chunk: bytes | memoryview) -> None: ...

    def end(self) -> None: ...


def boundary_of(content_type: str) -> bytes:
    """The boundary of a `multipart/related` content type; `pacs_bad_answer` for anything else."""
    kind, _, rest = content_type.partition(";")
    params: dict[str, str] = {}
    for item in rest.split(";"):
        name, _, value = item.strip().partition("=")
        params[name.strip().lower()] = value.strip().strip('"')
    boundary = params.get("boundary", "")
    if kind.strip().lower() != "multipart/related" or not 0 < len(boundary) <= 70:
        shown = printable(content_type, 80)
        raise PacsError("pacs_bad_answer", f"the PACS answered a retrieval with {shown!r}, not multipart DICOM")
    return boundary.encode("latin-1", "replace")


class MultipartReader:
    """Feed the body; parts go to `sink`; `finish()` refuses an answer without its closing boundary."""

    def __init__(self, boundary: bytes, sink: PartSink, part_limit: int, header_limit: int) -> None:
        self.dash = b"--" + boundary
        self.delim = b"\r\n" + self.dash
        self.sink, self.part_limit, self.header_limit = sink, part_limit, header_limit
        self.state = "preamble"
        self.parts = 0
        self._pending = b""  # outside a body: the start of a boundary line or headers still incomplete
        self._tail = b""  # inside a body: its last bytes, which may begin the delimiter
        self._size = 0
        self._declared: int | None = None

    def _emit(self, piece: bytes | memoryview) -> None:
        self._size += len(piece)
        if self._size > self.part_limit:
            raise PacsError(
                "pacs_part_too_large",
                f"instance {self.parts + 1} of the answer exceeds {self.part_limit // (1024 * 1024)} MiB",
            )
        if piece:
            self.sink.data(piece)

    def _headers(self, block: bytes) -> dict[str, str]:
        headers: dict[str, str] = {}
        for line in block.decode("latin-1").split("\r\n"):
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        declared = headers.get("content-length", "")
        self._declared = int(declared) if declared.isdigit() else None
        return headers

    def _end_part(self) -> None:
        if self._declared is not None and self._declared != self._size:
            raise PacsError(
                "pacs_truncated",
                f"instance {self.parts + 1} holds {self._size} bytes where its part announced {self._declared}",
            )
        self.sink.end()
        self.parts += 1
        self.state = "delimiter"

    def _body(self, data: bytes, pos: int) -> int:
        """A body's bytes from `pos` handed on up to its delimiter; where the next state starts, or NEED_MORE."""
        width = len(self.delim)
        if self._tail:  # a delimiter may begin in the kept tail: looked for in the tail and the next few bytes
            tail, self._tail = self._tail, b""
            small = tail + data[pos : pos + width - 1]
            j = small.find(self.delim)
            if j >= 0:
                self._emit(small[:j])
                self._end_part()
                return pos + j + width - len(tail)
            if len(data) - pos <= width - 1:  # this piece was too short to decide: all of it kept
                keep = max(0, len(small) - (width - 1))
                self._emit(small[:keep])
                self._tail = small[keep:]
                return NEED_MORE
            self._emit(tail)  # a delimiter starting in it would lie wholly within `small`
        view = memoryview(data)
        j = data.find(self.delim, pos)
        if j >= 0:
            self._emit(view[pos:j])
            self._end_part()
            return j + width
        keep = max(pos, len(data) - (width - 1))
        self._emit(view[pos:keep])
        self._tail = data[keep:]
        return NEED_MORE

    def _step(self, data: bytes, pos: int) -> int:
        """Advance one state from `pos`; where the next state starts, or NEED_MORE."""
        if self.state == "body":
            return self._body(data, pos)
        if self.state == "preamble":
            i = data.find(self.dash, pos)
            if i < 0:
                if len(data) - pos > self.header_limit:
                    raise PacsError("pacs_bad_answer", "the multipart answer holds no boundary")
                return NEED_MORE
            self.state = "delimiter"
            return i + len(self.dash)
        if self.state == "delimiter":
            if len(data) - pos < 2:
                return NEED_MORE
            if data[pos : pos + 2] == b"--":
                self.state = "done"
                return len(data)
            j = data.find(b"\r\n", pos)
            if j < 0 or data[pos:j].strip(b" \t"):
                if j >= 0 or len(data) - pos > MAX_PADDING:
                    raise PacsError("pacs_bad_answer", "a malformed multipart boundary line")
                return NEED_MORE
            self.state = "headers"
            return j + 2
        if self.state == "headers":
            j = pos if data[pos : pos + 2] == b"\r\n" else data.find(b"\r\n\r\n", pos)
            if j < 0:
                if len(data) - pos > self.header_limit:
                    raise PacsError("pacs_bad_answer", "the headers of a part are too long")
                return NEED_MORE
            headers = self._headers(data[pos:j])
            self._size = 0
            self.sink.begin(headers)
            self.state = "body"
            return j + (2 if j == pos else 4)
        return len(data)  # done: what follows the closing boundary is ignored

    def feed(self, data: bytes) -> None:
        if self._pending:
            data, self._pending = self._pending + data, b""
        pos = 0
        while pos < len(data):
            nxt = self._step(data, pos)
            if nxt == NEED_MORE:
                if self.state != "body":
                    self._pending = data[pos:]
                return
            pos = nxt

    def finish(self) -> None:
        """The body ended: refused (`pacs_truncated`) unless the closing boundary came."""
        if self.state != "done":
            where = f"in the middle of instance {self.parts + 1}" if self.state == "body" else "without its end"
            raise PacsError("pacs_truncated", f"the retrieval ended {where} (after {self.parts} complete)")
