"""Destinations compared as the network sees them: a DICOMweb URL is normalised (scheme and host case, default
port, unreserved escapes, trailing slash) before `--allow-store` compares it and before a request is sent, and a
path with dot segments (plain or percent-encoded), an encoded slash or a backslash is refused; a PACS busy on a
store (503) is `pacs_failed` after its retries."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from copilot.errors import HandlerError
from copilot.pacs.client import PacsClient
from copilot.pacs.urls import parse_dicomweb_url, service_root
from copilot.runtime import _destination
from copilot.tools.writes import allowed, pacs_destination
from tests.hostile_pacs import HostilePacs, private_env

STUDY = "1.2.3"


@pytest.fixture(scope="module")
def pacs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostilePacs]:
    with HostilePacs(tmp_path_factory.mktemp("dest") / "ct", n=1) as server:
        yield server


@pytest.mark.parametrize(
    ("url", "root"),
    [("HTTP://PACS.Example:80/m/ok/dicom-web/", "http://pacs.example/m/ok/dicom-web"),
     ("https://pacs.example:443/m/%6Fk/dicom%2Dweb", "https://pacs.example/m/ok/dicom-web"),
     ("https://pacs.example:8443/a%3ab", "https://pacs.example:8443/a%3Ab"),
     ("http://[::1]:8042/dicom-web", "http://[::1]:8042/dicom-web")],
)  # fmt: skip
def test_a_service_root_is_normalised_as_the_network_sees_it(url: str, root: str) -> None:
    assert service_root(url) == root


@pytest.mark.parametrize(
    "url",
    ["http://h/m/ok/dicom-web/studies/1.2/../../../evil/dicom-web/studies/1.2",
     "http://h/m/ok/dicom-web/%2e%2e/%2E%2E/evil/dicom-web/studies/1.2",
     "http://h/m/ok/./dicom-web/studies/1.2", "http://h/m/ok%2f..%2fevil/studies/1.2",
     "http://h/m/ok\\..\\evil/studies/1.2", "http://h/m/ok/.%2e/evil/studies/1.2"],
)  # fmt: skip
def test_dot_segments_plain_or_encoded_are_refused(url: str) -> None:
    with pytest.raises(HandlerError) as err:
        parse_dicomweb_url(url)
    assert err.value.code == "invalid_url" and "'..' segments" in err.value.message
    with pytest.raises(ValueError, match="segments"):  # nor named by --allow-store
        _destination(url)


def test_allow_store_compares_normalised_urls() -> None:
    named = (_destination("HTTP://Pacs.Example:80/m/ok/dicom-web/"),)
    assert named == ("http://pacs.example/m/ok/dicom-web",)
    for same in ("http://pacs.example/m/ok/dicom-web", "http://PACS.example:80/m/ok/%64icom-web/",
                 "http://pacs.example/m/ok/dicom-web/studies/1.2"):  # fmt: skip
        assert allowed(pacs_destination(same), named), same
    for other in ("http://pacs.example/m/ok/dicom-web-evil", "http://pacs.example:8080/m/ok/dicom-web",
                  "https://pacs.example/m/ok/dicom-web", "http://pacs.example/m/ok/dicom-web/../../evil/dicom-web",
                  "http://pacs.example/m/ok/dicom-web/%2e%2e/%2e%2e/evil/dicom-web", "http://evil.example/m/ok"):
        assert not allowed(other, named), other
    assert not allowed("http://pacs.example/m/evil/dicom-web", ("http://pacs.example/m/ok/../evil/dicom-web",))


def test_requests_go_to_exactly_the_url_checked(
    pacs: HostilePacs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    private_env(monkeypatch, tmp_path)
    pacs.mode, pacs.requests[:] = "ok", []
    client = PacsClient(f"HTTP://127.0.0.1:{pacs.port}/%64w/")
    assert client.root == pacs.root
    client.search()
    assert pacs.requests and all(p.startswith("/dw/studies") for p in pacs.requests)
    with pytest.raises(HandlerError):
        PacsClient(f"http://127.0.0.1:{pacs.port}/x/%2e%2e/dw")
    assert all(".." not in p and "%2" not in p.split("?")[0] for p in pacs.requests)


def test_a_busy_pacs_on_a_store_is_pacs_failed_after_its_retries(
    pacs: HostilePacs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    private_env(monkeypatch, tmp_path)
    pacs.mode, pacs.posts[:] = "busy", []
    start = time.monotonic()
    try:
        with pytest.raises(HandlerError) as err:
            PacsClient(pacs.root).store(pacs.data.datasets[:1], pacs.data.study)
    finally:
        pacs.mode = "ok"
    assert err.value.code == "pacs_failed" and err.value.status == 502 and "HTTP 503" in err.value.message
    assert len(pacs.posts) == 3 and all(p == f"/dw/studies/{pacs.data.study}" for p in pacs.posts)
    assert time.monotonic() - start < 10
