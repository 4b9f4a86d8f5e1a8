"""DICOMweb study and series URLs: `http(s)://HOST[:PORT]/PREFIX/studies/UID[/series/UID]`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from copilot.errors import HandlerError

UID_RE = re.compile(r"^[0-9]+(\.[0-9]+)*$")
_PATH_RE = re.compile(r"^(?P<prefix>.*?)/studies/(?P<study>[^/]+)(?:/series/(?P<series>[^/]+))?/?$")


@dataclass(frozen=True)
class DicomwebRef:
    """A study (or one of its series) on a DICOMweb server; `base` is the service root, without credentials."""

    base: str
    study: str
    series: str | None = None

    @property
    def url(self) -> str:
        """The URL again, as recorded in a trace (never with credentials)."""
        tail = f"/series/{self.series}" if self.series else ""
        return f"{self.base}/studies/{self.study}{tail}"


def is_dicomweb_url(value: object) -> bool:
    """True for a string that starts like an http(s) URL (whether it names a study is `parse_dicomweb_url`'s
    business)."""
    return isinstance(value, str) and value.lower().startswith(("http://", "https://"))


def check_uid(value: str, what: str) -> str:
    """A DICOM UID: digits and dots, at most 64 characters."""
    if len(value) > 64 or not UID_RE.match(value):
        raise HandlerError("invalid_url", f"{what} {value[:80]!r} is not a DICOM UID")
    return value


def service_root(url: str) -> str:
    """A DICOMweb service root without credentials, query or fragment, and without a trailing slash."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise HandlerError("invalid_url", f"{_safe(url)!r} is not an http(s) URL with a host")
    if parts.username or parts.password:
        raise HandlerError(
            "invalid_url",
            "put PACS credentials in MEDCOPILOT_PACS_TOKEN / MEDCOPILOT_PACS_USER and MEDCOPILOT_PACS_PASSWORD "
            "or the PACS config file, not in the URL",
        )
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme.lower(), host, parts.path.rstrip("/"), "", ""))


def parse_dicomweb_url(url: str) -> DicomwebRef:
    """The service root, study and (optional) series of a DICOMweb study or series URL."""
    root = service_root(url)
    parts = urlsplit(root)
    m = _PATH_RE.match(parts.path)
    if m is None:
        raise HandlerError(
            "invalid_url", f"{_safe(url)!r}: expected http(s)://HOST/…/studies/STUDY_UID[/series/SERIES_UID]"
        )
    base = urlunsplit((parts.scheme, parts.netloc, m.group("prefix"), "", ""))
    series = m.group("series")
    return DicomwebRef(base, check_uid(m.group("study"), "study"), check_uid(series, "series") if series else None)


def _safe(url: str) -> str:
    """A URL for an error message: no credentials, at most 200 characters."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return urlunsplit((parts.scheme, host + (f":{parts.port}" if parts.port else ""), parts.path, "", ""))[:200]
