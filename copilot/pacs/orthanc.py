"""A private Orthanc PACS on a loopback port (Debian `orthanc` + `orthanc-dicomweb`): for the tests, the demo,
and trying the PACS features without a hospital's server.

It runs with its own temporary storage, no DICOM (DIMSE) port, HTTP basic authentication and the DICOMweb plugin
at `/dicom-web`, so it never collides with a system-wide Orthanc service (port 8042/4242). It is unreachable from
the network: its HTTP server listens on 127.0.0.1 where Orthanc can be told so (`HttpBindAddresses`, recent
releases), and refuses every client that is not on this machine's loopback (`RemoteAccessAllowed: false`: HTTP
401 and no data, whatever the credentials) on the releases that listen on every interface.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

PLUGIN_DIRS = ("/usr/share/orthanc/plugins", "/usr/lib/orthanc", "/usr/local/share/orthanc/plugins")
STARTUP_S = 30.0


class OrthancUnavailable(RuntimeError):
    """Orthanc or its DICOMweb plugin is not installed here (`make sysdeps` installs both)."""


def orthanc_binary() -> str | None:
    """The Orthanc executable (Debian installs it to /usr/sbin, outside a user's PATH)."""
    return shutil.which("Orthanc") or next((p for p in ("/usr/sbin/Orthanc",) if os.access(p, os.X_OK)), None)


def plugin(name: str) -> str | None:
    """A plugin library by name (`OrthancDicomWeb`, `OrthancWSI`)."""
    dirs = [os.environ["MEDCOPILOT_ORTHANC_PLUGINS"]] if os.environ.get("MEDCOPILOT_ORTHANC_PLUGINS") else []
    for folder in (*dirs, *PLUGIN_DIRS):
        for path in sorted(Path(folder).glob(f"lib{name}.so*")) if Path(folder).is_dir() else []:
            return str(path)
    return None


def missing() -> str | None:
    """Why no private Orthanc can start here (one line), or None."""
    if orthanc_binary() is None:
        return "Orthanc is not installed (Debian package `orthanc`; `make sysdeps`)"
    if plugin("OrthancDicomWeb") is None:
        return "the Orthanc DICOMweb plugin is not installed (Debian package `orthanc-dicomweb`; `make sysdeps`)"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalOrthanc:
    """`with LocalOrthanc() as pacs:` — `pacs.dicomweb` is the service root, `pacs.user`/`pacs.password` its login."""

    def __init__(self, folder: str | Path | None = None, wsi: bool = False) -> None:
        reason = missing()
        if reason:
            raise OrthancUnavailable(reason)
        self._tmp = None if folder is not None else tempfile.TemporaryDirectory(prefix="medcopilot-orthanc-")
        self.folder = Path(folder) if folder is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self.port = free_port()
        self.user, self.password = f"reader-{secrets.token_hex(4)}", secrets.token_urlsafe(12)
        self.wsi = wsi
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def dicomweb(self) -> str:
        return f"{self.url}/dicom-web"

    def config(self) -> dict[str, object]:
        plugins = [plugin("OrthancDicomWeb")] + ([plugin("OrthancWSI")] if self.wsi and plugin("OrthancWSI") else [])
        storage = str(self.folder / "storage")
        return {
            "Name": "MedCopilot test PACS",
            "StorageDirectory": storage,
            "IndexDirectory": storage,
            "HttpPort": self.port,
            "HttpBindAddresses": ["127.0.0.1"],  # loopback only, on the releases that have the option
            "HttpThreadsCount": 4,
            "RemoteAccessAllowed": False,
            "DicomServerEnabled": False,
            "AuthenticationEnabled": True,
            "RegisteredUsers": {self.user: self.password},
            "Plugins": plugins,
            "DicomWeb": {"Enable": True, "Root": "/dicom-web/", "EnableWado": False, "StudiesMetadata": "Full"},
            "ConcurrentJobs": 1,
            "LimitFindResults": 0,
        }

    def start(self) -> LocalOrthanc:
        import requests

        cfg = self.folder / "orthanc.json"
        (self.folder / "storage").mkdir(parents=True, exist_ok=True)
        cfg.write_text(json.dumps(self.config(), indent=1), encoding="utf-8")
        log = (self.folder / "orthanc.log").open("wb")
        self._proc = subprocess.Popen([orthanc_binary() or "Orthanc", str(cfg)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"Orthanc exited at start: {self.log_tail()}")
            try:
                if requests.get(f"{self.dicomweb}/studies", auth=(self.user, self.password), timeout=1).ok:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"Orthanc did not answer within {STARTUP_S:.0f} s: {self.log_tail()}")

    def log_tail(self, n: int = 800) -> str:
        try:
            return (self.folder / "orthanc.log").read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> LocalOrthanc:
        return self.start()

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.stop()
