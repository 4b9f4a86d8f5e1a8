"""GET requests to a PACS as bounded streams: an overall deadline (each read waits no longer than what is
left of it), same-origin redirects only, busy answers retried, and the body decompressed in bounded steps
and counted against a byte limit as it arrives, so that no answer is ever held whole."""

from __future__ import annotations

import socket
import time
import zlib
from collections.abc import Iterator
from typing import Any

from copilot.pacs.errors import PacsError, http_refusal
from copilot.pacs.limits import Deadline, PacsLimits
from copilot.pacs.printable import printable

CHUNK = 64 * 1024
MAX_HOPS = 5
RETRY_STATUS = frozenset({429, 503, 504})
RETRY_WAITS = (0.25, 0.5)  # busy or unreachable: tried three times within about a second
CONNECT_S = 10.0


class _Inflater:
    """A content encoding undone in steps of at most `CHUNK` bytes (a gzip bomb never inflates at once)."""

    def __init__(self, encoding: str | None) -> None:
        enc = (encoding or "identity").strip().lower()
        if enc in ("", "identity"):
            self._z = None
        elif enc in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self._z = zlib.decompressobj()
        else:
            raise PacsError("pacs_bad_answer", f"the PACS answered in an unknown content encoding {printable(enc)!r}")

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._z is None:
            yield data
            return
        try:
            while data:
                out = self._z.decompress(data, CHUNK)
                data = self._z.unconsumed_tail
                if out:
                    yield out
        except zlib.error as exc:
            raise PacsError("pacs_bad_answer", f"a compressed answer that does not decompress ({exc})") from None

    def end(self) -> None:
        if self._z is not None and not self._z.eof:
            raise PacsError("pacs_truncated", "the compressed answer ended before its end")


def _socket_of(raw: Any) -> socket.socket | None:
    """The socket under a streamed response (to bound each read by the time left)."""
    sock = getattr(getattr(raw, "_connection", None), "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _bounded(pieces: Iterator[bytes], inflater: _Inflater, limit: int, code: str, what: str) -> Iterator[bytes]:
    """Raw pieces of a body, decoded, refused (`code`) once more than `limit` bytes came out."""
    total = 0
    for data in pieces:
        for out in inflater.feed(data):
            total += len(out)
            if total > limit:
                raise PacsError(code, f"{what} exceeds its bound of {limit // (1024 * 1024)} MiB")
            yield out
    inflater.end()


class Stream:
    """One answer's body, read in pieces within a deadline and a byte limit; `close()` drops the connection."""

    def __init__(
        self, response: Any, deadline: Deadline, limits: PacsLimits, limit: int, limit_code: str, what: str
    ) -> None:
        self.response, self.deadline, self.limits = response, deadline, limits
        self.limit, self.limit_code, self.what = limit, limit_code, what
        self.headers = response.headers
        self._inflater = _Inflater(response.headers.get("Content-Encoding"))

    def _read(self) -> bytes:
        import urllib3

        raw = self.response.raw
        left = self.deadline.check()
        sock = _socket_of(raw)
        try:
            if sock is not None:
                sock.settimeout(max(0.01, min(self.limits.read_s, left)))
            return bytes(raw.read1(CHUNK, decode_content=False) or b"")
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            self.deadline.check()
            raise PacsError(
                "pacs_unreachable", f"the PACS went silent for {self.limits.read_s:g} s during {self.what}"
            ) from None
        except (urllib3.exceptions.HTTPError, OSError):
            raise PacsError(
                "pacs_truncated", f"the connection ended before {self.what} was complete (dropped or cut short)"
            ) from None

    def chunks(self) -> Iterator[bytes]:
        """The decoded body, piece by piece; over the limit is `limit_code`, past the deadline `pacs_deadline`."""
        return _bounded(iter(self._read, b""), self._inflater, self.limit, self.limit_code, self.what)

    def close(self) -> None:
        self.response.close()

    def release(self) -> None:
        """The answer was read: its connection goes back to the session for the next request once the body's
        end is reached (at most a few more pieces of it read), else it is dropped."""
        try:
            for _ in range(4):
                if not self._read():
                    self.response.raw.release_conn()
                    return
        except PacsError:
            pass
        self.close()


class _BoundedBody:
    """A non-streamed answer's body (a store's reply, read whole by `requests`) read no further than `limit`
    decoded bytes and no longer than the deadline; everything else as the wrapped urllib3 response."""

    def __init__(self, raw: Any, limit: int, deadline: Deadline) -> None:
        self._raw, self._limit, self._deadline = raw, limit, deadline

    def _read(self) -> bytes:
        self._deadline.check()
        return bytes(self._raw.read1(CHUNK, decode_content=False) or b"")

    def stream(self, amt: int | None = None, decode_content: bool = True) -> Iterator[bytes]:
        inflater = _Inflater(self._raw.headers.get("Content-Encoding") if decode_content else None)
        return _bounded(iter(self._read, b""), inflater, self._limit, "pacs_answer_too_large", "the PACS answer")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def bound_posts(limits: PacsLimits, deadline: Deadline) -> Any:
    """A response hook bounding the answers to POST requests (stores), which `requests` reads whole."""

    def hook(response: Any, *args: Any, **kwargs: Any) -> Any:
        if response.request is not None and response.request.method == "POST":
            response.raw = _BoundedBody(response.raw, limits.json_bytes, deadline)
        return response

    return hook


def _wait(deadline: Deadline, attempt: int) -> bool:
    """Sleep before a retry when one is left and the deadline allows it."""
    if attempt >= len(RETRY_WAITS) or deadline.left() <= RETRY_WAITS[attempt]:
        return False
    time.sleep(RETRY_WAITS[attempt])
    return True


def open_stream(
    session: Any, url: str, *, accept: str, deadline: Deadline, limits: PacsLimits, what: str, limit: int,
    limit_code: str, encoding: str = "gzip, deflate",
) -> Stream:  # fmt: skip
    """GET `url` and return its body as a `Stream` (`encoding`: the content encodings asked for; `identity` where
    compressing costs the server more than it saves, as for pixel data); refusals are named (`pacs_refused`,
    `pacs_failed`, `pacs_unreachable`, `pacs_tls`, `pacs_redirect`, `pacs_deadline`)."""
    import requests

    attempt = hops = 0
    while True:
        left = deadline.check()
        try:
            response = session.get(
                url, headers={"Accept": accept, "Accept-Encoding": encoding}, stream=True, allow_redirects=False,
                timeout=(min(CONNECT_S, left), min(limits.read_s, left)),
            )  # fmt: skip
        except requests.exceptions.SSLError:
            raise PacsError("pacs_tls", "the TLS certificate of the PACS could not be verified "
                                        "(a private CA: MEDCOPILOT_PACS_CA_BUNDLE)") from None  # fmt: skip
        except requests.exceptions.ReadTimeout:
            deadline.check()
            raise PacsError("pacs_unreachable", f"the PACS did not answer {what} within {limits.read_s:g} s") from None
        except requests.RequestException as exc:
            if _wait(deadline, attempt):
                attempt += 1
                continue
            raise PacsError("pacs_unreachable", f"the PACS could not be reached ({type(exc).__name__})") from None
        if response.is_redirect:  # a redirect to another origin was refused by the session's hook
            response.close()
            hops += 1
            if hops > MAX_HOPS:
                raise PacsError("pacs_redirect", f"the PACS redirected more than {MAX_HOPS} times")
            url = requests.compat.urljoin(url, response.headers["Location"])
            continue
        if response.status_code in RETRY_STATUS and _wait(deadline, attempt):
            response.close()
            attempt += 1
            continue
        if response.status_code >= 400:
            response.close()
            raise http_refusal(what, response.status_code, response.reason or "")
        return Stream(response, deadline, limits, limit, limit_code, what)
