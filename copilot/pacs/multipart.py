"""A WADO-RS `multipart/related` answer parsed as it arrives: each part handed to a sink piece by piece, its
size bounded, its announced Content-Length checked, and the closing boundary required (no closing boundary:
the answer was cut short)."""

from __future__ import annotations

from typing import Protocol

from copilot.pacs.errors import PacsError
from copilot.pacs.printable import printable

MAX_PADDING = 256


class PartSink(Protocol):
    """Receives the parts of a multipart answer."""

    def begin(self, headers: dict[str, str]) -> None: ...

    def data(self, chunk: bytes) -> None: ...

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
        self.buf = bytearray()
        self.state = "preamble"
        self.parts = 0
        self._size = 0
        self._declared: int | None = None

    def _emit(self, piece: bytes | bytearray) -> None:
        self._size += len(piece)
        if self._size > self.part_limit:
            raise PacsError(
                "pacs_part_too_large",
                f"instance {self.parts + 1} of the answer exceeds {self.part_limit // (1024 * 1024)} MiB",
            )
        if piece:
            self.sink.data(bytes(piece))

    def _headers(self, block: bytes) -> dict[str, str]:
        headers: dict[str, str] = {}
        for line in block.decode("latin-1").split("\r\n"):
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        declared = headers.get("content-length", "")
        self._declared = int(declared) if declared.isdigit() else None
        return headers

    def _step(self) -> bool:
        """Advance one state; False when more bytes are needed."""
        buf = self.buf
        if self.state == "preamble":
            i = buf.find(self.dash)
            if i < 0:
                if len(buf) > self.header_limit:
                    raise PacsError("pacs_bad_answer", "the multipart answer holds no boundary")
                return False
            del buf[: i + len(self.dash)]
            self.state = "delimiter"
        elif self.state == "delimiter":
            if len(buf) < 2:
                return False
            if buf[:2] == b"--":
                self.state = "done"
                return False
            j = buf.find(b"\r\n")
            if j < 0 or buf[:j].strip(b" \t"):
                if j >= 0 or len(buf) > MAX_PADDING:
                    raise PacsError("pacs_bad_answer", "a malformed multipart boundary line")
                return False
            del buf[: j + 2]
            self.state = "headers"
        elif self.state == "headers":
            j = 0 if buf[:2] == b"\r\n" else buf.find(b"\r\n\r\n")
            if j < 0:
                if len(buf) > self.header_limit:
                    raise PacsError("pacs_bad_answer", "the headers of a part are too long")
                return False
            headers = self._headers(bytes(buf[:j]))
            del buf[: j + (2 if j == 0 else 4)]
            self._size = 0
            self.sink.begin(headers)
            self.state = "body"
        elif self.state == "body":
            i = buf.find(self.delim)
            if i < 0:
                keep = len(self.delim) - 1
                if len(buf) > keep:
                    self._emit(buf[: len(buf) - keep])
                    del buf[: len(buf) - keep]
                return False
            self._emit(buf[:i])
            del buf[: i + len(self.delim)]
            if self._declared is not None and self._declared != self._size:
                raise PacsError(
                    "pacs_truncated",
                    f"instance {self.parts + 1} holds {self._size} bytes where its part announced {self._declared}",
                )
            self.sink.end()
            self.parts += 1
            self.state = "delimiter"
        else:
            buf.clear()
            return False
        return True

    def feed(self, data: bytes) -> None:
        self.buf += data
        while self._step():
            pass

    def finish(self) -> None:
        """The body ended: refused (`pacs_truncated`) unless the closing boundary came."""
        if self.state != "done":
            where = f"in the middle of instance {self.parts + 1}" if self.state == "body" else "without its end"
            raise PacsError("pacs_truncated", f"the retrieval ended {where} (after {self.parts} complete)")
