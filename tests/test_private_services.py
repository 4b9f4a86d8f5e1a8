"""Services and files of our own: the private Orthanc refuses every client that is not on this machine's loopback
(and listens on loopback only where it can be told so), and a benchmark run folder is owner-only like sessions
(0700 folders, 0600 files: the results database with its answers, galleries, pages and the report)."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from copilot.medflow.runs import ResultsDB, run_lock
from copilot.pacs.orthanc import LocalOrthanc, missing


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _outward_address() -> str | None:
    """An address of this machine that is not loopback (no packet is sent), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
        except OSError:
            return None
        address = str(s.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@pytest.mark.skipif(missing() is not None, reason=str(missing()))
def test_the_private_orthanc_refuses_a_remote_client() -> None:
    import requests

    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no address besides loopback")
    with LocalOrthanc() as pacs:
        config = pacs.config()
        assert config["RemoteAccessAllowed"] is False and config["HttpBindAddresses"] == ["127.0.0.1"]
        auth = (pacs.user, pacs.password)
        assert requests.get(f"{pacs.dicomweb}/studies", auth=auth, timeout=5).status_code == 200
        try:
            remote = requests.get(f"http://{address}:{pacs.port}/dicom-web/studies", auth=auth, timeout=5)
        except requests.ConnectionError:
            return  # not listening there at all
        assert remote.status_code in (401, 403)  # whatever the credentials: no answer to another address


def test_a_benchmark_run_folder_is_owner_only(tmp_path: Path, umask_022: None) -> None:
    run = tmp_path / "run"
    with run_lock(run):
        db = ResultsDB(run / "results.sqlite")
        db.conn.execute("CREATE TABLE t (x TEXT)")
        db.conn.execute("INSERT INTO t VALUES ('an answer')")
        db.conn.commit()
        (run / "gallery").mkdir()
        (run / "gallery" / "case.png").write_bytes(b"png")  # written by a library with the umask's mode
        (run / "report.html").write_text("<html>")
        assert _mode(run) == 0o700 and _mode(run / "results.sqlite") == 0o600
        assert all(_mode(p) == 0o600 for p in run.glob("results.sqlite*"))
        db.close()
    assert _mode(run / "gallery") == 0o700 and _mode(run / "gallery" / "case.png") == 0o600
    assert _mode(run / "report.html") == 0o600 and _mode(run / ".lock") == 0o600
    older = tmp_path / "older"
    older.mkdir(mode=0o755)
    with run_lock(older):
        assert _mode(older) == 0o700  # an older, wider run folder narrowed when next used
