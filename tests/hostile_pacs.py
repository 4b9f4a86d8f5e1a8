"""A misbehaving DICOMweb server for the PACS client's tests: a real HTTP server in a thread whose answers
are chosen per test (`server.mode`): an endless part, a gzip bomb, a short Content-Length, a dropped
connection, a trickle, 10,000 studies, escape sequences, deeply nested JSON, a cross-origin redirect. With
`instance_level` it also lists instances and answers each on its own (`instance_mode` for the one at `fail_at`),
after `delay(index)` seconds, counting the requests in flight at once (`peak`)."""

from __future__ import annotations

import contextlib
import copy
import http.server
import io
import json
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydicom

from copilot.pacs.sample import write_ct_series

BOUNDARY = "hostile-boundary-7f3a"
ESCAPES = "\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]52;c;ZXZpbA==\x07\x9b31mred\x1b[0m\u202eevil\x07\x08\r"


def _instance_bytes(ds: pydicom.Dataset) -> bytes:
    buf = io.BytesIO()
    ds.save_as(buf, enforce_file_format=True)
    return buf.getvalue()


class Series:
    """`n` CT slices 2 mm apart (the series every retrieval case serves, in part or in full)."""

    def __init__(self, folder: Path, n: int = 4) -> None:
        self.datasets = write_ct_series(folder, n=n)
        for k, ds in enumerate(self.datasets):
            ds.ImagePositionPatient = [-40.0, -30.0, 2.0 * k]
        self.study, self.series = str(self.datasets[0].StudyInstanceUID), str(self.datasets[0].SeriesInstanceUID)
        self.parts = [_instance_bytes(ds) for ds in self.datasets]

    def fresh(self) -> bytes:
        """Another instance of the series (a new SOP Instance UID)."""
        ds = copy.deepcopy(self.datasets[0])
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = pydicom.uid.generate_uid()
        return _instance_bytes(ds)


def _part(data: bytes) -> bytes:
    return f"--{BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n".encode() + data + b"\r\n"


def _study(uid: str, description: str = "chest") -> dict[str, object]:
    return {
        "0020000D": {"vr": "UI", "Value": [uid]},
        "00081030": {"vr": "LO", "Value": [description]},
        "00100020": {"vr": "LO", "Value": ["MC-HOSTILE"]},
        "00100010": {"vr": "PN", "Value": [{"Alphabetic": "Doe^" + description[:8]}]},
        "00080020": {"vr": "DA", "Value": ["20240611"]},
    }


def private_env(monkeypatch: Any, tmp_path: Path) -> None:
    """No PACS credentials from the environment; a private config folder and cache."""
    for name in ("MEDCOPILOT_PACS_TOKEN", "MEDCOPILOT_PACS_USER", "MEDCOPILOT_PACS_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("MEDCOPILOT_PACS_CACHE", str(tmp_path / "cache"))


class HostilePacs:
    """`with HostilePacs(tmp) as pacs:` — `pacs.root` is its DICOMweb root; set `pacs.mode` per case."""

    def __init__(self, folder: Path, n: int = 4) -> None:
        self.data = Series(folder, n)
        self.mode = "ok"
        self.retrieval: str | None = None  # another mode for retrievals than for searches
        self.requests: list[str] = []
        self.posts: list[str] = []  # the paths stores were sent to
        self.instance_level, self.instance_mode, self.fail_at = False, "ok", 2
        self.delay: Callable[[int], float] = lambda index: 0.0
        self.active = self.peak = 0
        self._lock = threading.Lock()
        pacs = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                pacs.requests.append(self.path)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client stopped reading
                    pacs.answer(self)

            def do_POST(self) -> None:  # a store: its reply is a gzip bomb (mode `busy`: HTTP 503)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                pacs.posts.append(self.path)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    if pacs.mode == "busy":
                        self.send_response(503, "Service Unavailable")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    pacs._head(self, "application/dicom+json", {"Content-Encoding": "gzip"})
                    pacs._gzip(self, b"{", b" " * (1 << 20), 1 << 12)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.root = f"http://127.0.0.1:{self.port}/dw"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HostilePacs:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def series_url(self) -> str:
        return f"{self.root}/studies/{self.data.study}/series/{self.data.series}"

    # ----- answers -----
    def answer(self, h: http.server.BaseHTTPRequestHandler) -> None:
        path = h.path.split("?")[0]
        if path.endswith("/series"):
            return self._json(h, [{"0020000E": {"vr": "UI", "Value": [self.data.series]},
                                   "00080060": {"vr": "CS", "Value": ["CT"]},
                                   "00201209": {"vr": "IS", "Value": [len(self.data.parts)]}}])  # fmt: skip
        if self.instance_level and path.endswith("/instances"):  # listed newest first: the client sorts
            return self._json(h, [{"00080018": {"vr": "UI", "Value": [str(ds.SOPInstanceUID)]},
                                   "00200013": {"vr": "IS", "Value": [int(ds.InstanceNumber)]}}
                                  for ds in reversed(self.data.datasets)])  # fmt: skip
        if self.instance_level and "/instances/" in path:
            return self._counted(h, path.rsplit("/", 1)[1])
        if path.endswith("/studies"):
            return self._search(h)
        if "/series/" in path:
            return self._retrieve(h)
        h.send_error(404)

    def _counted(self, h: http.server.BaseHTTPRequestHandler, uid: str) -> None:
        """One instance's answer, the requests in flight counted while it is made."""
        uids = [str(ds.SOPInstanceUID) for ds in self.data.datasets]
        if uid not in uids:
            return h.send_error(404)
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            index = uids.index(uid)
            time.sleep(self.delay(index))
            self._instance(h, index, self.instance_mode if index == self.fail_at else "ok")
        finally:
            with self._lock:
                self.active -= 1

    def _instance(self, h: http.server.BaseHTTPRequestHandler, index: int, mode: str) -> None:
        part, end = self.data.parts[index], f"--{BOUNDARY}--\r\n".encode()
        if mode == "failed":
            return h.send_error(500)
        self._multipart(h)
        if mode == "dropped":  # the connection ends in the middle of the part
            h.wfile.write(_part(part)[: len(part) // 2])
        elif mode == "other_instance":
            h.wfile.write(_part(self.data.parts[(index + 1) % len(self.data.parts)]) + end)
        elif mode == "two_parts":
            h.wfile.write(_part(part) + _part(part) + end)
        elif mode == "endless_part":
            h.wfile.write(f"--{BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n".encode())
            for _ in range(1 << 16):
                h.wfile.write(b"\x00" * (1 << 16))
        else:
            h.wfile.write(_part(part) + end)

    def _head(self, h: http.server.BaseHTTPRequestHandler, ctype: str, extra: dict[str, str] | None = None) -> None:
        h.send_response(200)
        h.send_header("Content-Type", ctype)
        for name, value in (extra or {}).items():
            h.send_header(name, value)
        h.end_headers()

    def _json(self, h: http.server.BaseHTTPRequestHandler, items: object) -> None:
        body = json.dumps(items).encode()
        self._head(h, "application/dicom+json", {"Content-Length": str(len(body))})
        h.wfile.write(body)

    def _search(self, h: http.server.BaseHTTPRequestHandler) -> None:
        mode = self.mode
        if mode == "many":  # ignores limit and offset: 10,000 studies, written as they are read
            self._head(h, "application/dicom+json")
            h.wfile.write(b"[")
            for n in range(10_000):
                h.wfile.write((b"," if n else b"") + json.dumps(_study(f"1.2.3.{n + 1}")).encode())
            h.wfile.write(b"]")
        elif mode == "escapes":
            self._json(h, [_study("1.2.3.1", f"chest {ESCAPES} ct")])
        elif mode == "nested":
            self._head(h, "application/dicom+json")
            h.wfile.write(b"[{" + b'"a":[' * 100_000)
        elif mode == "not_objects":
            self._json(h, [1, "two", [3]])
        elif mode == "gzip_bomb":
            self._head(h, "application/dicom+json", {"Content-Encoding": "gzip"})
            self._gzip(h, b"[", b" " * (1 << 20), 1 << 12)  # 4 GiB of blanks, compressed as read
        elif mode == "trickle":
            self._head(h, "application/dicom+json")
            for c in json.dumps([_study("1.2.3.1")]).encode():
                h.wfile.write(bytes([c]))
                h.wfile.flush()
                time.sleep(0.3)
        elif mode == "redirect_away":
            h.send_response(302)
            h.send_header("Location", f"http://localhost:{self.port}/dw/studies")
            h.end_headers()
        elif mode == "redirect_here":
            self.mode = "ok"
            h.send_response(302)
            h.send_header("Location", "/dw/studies?moved=1")
            h.end_headers()
        else:
            self._json(h, [_study("1.2.3.1")])

    def _gzip(self, h: http.server.BaseHTTPRequestHandler, head: bytes, block: bytes, blocks: int) -> None:
        z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        h.wfile.write(z.compress(head))
        for _ in range(blocks):
            out = z.compress(block)
            if out:
                h.wfile.write(out)
        h.wfile.write(z.flush())

    def _multipart(self, h: http.server.BaseHTTPRequestHandler, extra: dict[str, str] | None = None) -> None:
        self._head(h, f'multipart/related; type="application/dicom"; boundary={BOUNDARY}', extra)

    def _retrieve(self, h: http.server.BaseHTTPRequestHandler) -> None:
        mode, parts = self.retrieval or self.mode, self.data.parts
        if mode == "short_series":  # ends properly after 3 of the 4 instances the listing announced
            self._multipart(h)
            h.wfile.write(b"".join(_part(p) for p in parts[:3]) + f"--{BOUNDARY}--\r\n".encode())
        elif mode == "short_length":  # announces the whole answer, sends half of the third part, closes
            body = b"".join(_part(p) for p in parts) + f"--{BOUNDARY}--\r\n".encode()
            cut = len(b"".join(_part(p) for p in parts[:2])) + len(parts[2]) // 2
            self._multipart(h, {"Content-Length": str(len(body))})
            h.wfile.write(body[:cut])
        elif mode == "cut_pixels":  # framed correctly, but the last instance's pixel data cut short
            self._multipart(h)
            h.wfile.write(b"".join(_part(p) for p in [*parts[:3], parts[3][:-5000]]) + f"--{BOUNDARY}--\r\n".encode())
        elif mode == "dropped":  # no length, no closing boundary: the connection just ends mid-part
            self._multipart(h)
            h.wfile.write(b"".join(_part(p) for p in parts[:2]) + _part(parts[2])[:5000])
        elif mode == "endless_part":
            self._multipart(h)
            h.wfile.write(_part(parts[0]) + f"--{BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n".encode())
            block = b"\x00" * (1 << 16)
            for _ in range(1 << 16):  # 4 GiB, never a closing boundary
                h.wfile.write(block)
        elif mode == "endless_series":  # the listing says 4; new instances keep coming
            self._multipart(h)
            for _ in range(100_000):
                h.wfile.write(_part(self.data.fresh()))
        elif mode == "gzip_bomb":
            self._multipart(h, {"Content-Encoding": "gzip"})
            head = f"--{BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n".encode() + parts[0]
            self._gzip(h, head, b"\x00" * (1 << 20), 4096)
        elif mode == "not_dicom":
            self._multipart(h)
            h.wfile.write(f"--{BOUNDARY}\r\nContent-Type: text/html\r\n\r\n<html>\r\n--{BOUNDARY}--\r\n".encode())
        elif mode == "trickle":
            self._multipart(h)
            for c in _part(parts[0]):
                h.wfile.write(bytes([c]))
                h.wfile.flush()
                time.sleep(0.3)
        else:
            self._multipart(h)
            h.wfile.write(b"".join(_part(p) for p in parts) + f"--{BOUNDARY}--\r\n".encode())
