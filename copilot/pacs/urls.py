"""DICOMweb study and series URLs: `http(s)://HOST[:PORT]/PREFIX/studies/UID[/series/UID]`.

A URL is normalised as the network would see it before it is compared with `--allow-store` or sent: scheme and
host lower-case, the default port dropped, percent-encoded unreserved characters decoded (other escapes with
upper-case hex), the trailing slash dropped. A path with a dot segment (`.`, `..`, or `%2e%2e`), an encoded slash or a
backslash is refused: an HTTP client or server would resolve it to another path than the one checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from copilot.errors import HandlerError

UID_RE = re.compile(r"^[0-9]+(\.[0-9]+)*$")
_ESCAPE_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_DEFAULT_PORTS = {"http": 80, "https": 443}
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
    """A DICOMweb service root normalised as the network sees it (see the module's notes), without credentials,
    query or fragment; a dot segment, an encoded slash or a backslash in its path is refused (`invalid_url`)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise HandlerError("invalid_url", f"{_safe(url)!r} is not an http(s) URL with a host")
    if parts.username or parts.password:
        raise HandlerError(
            "invalid_url",
            "put PACS credentials in MEDCOPILOT_PACS_TOKEN / MEDCOPILOT_PACS_USER and MEDCOPILOT_PACS_PASSWORD "
            "or the PACS config file, not in the URL",
        )
    try:
        port = parts.port
    except ValueError:
        raise HandlerError("invalid_url", f"{_safe(url)!r} has an invalid port") from None
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    netloc = host + (f":{port}" if port is not None and port != _DEFAULT_PORTS[scheme] else "")
    return urlunsplit((scheme, netloc, normal_path(parts.path, url), "", ""))


def normal_path(path: str, url: str = "") -> str:
    """A URL path with unreserved escapes decoded, other escapes upper-case and no trailing slash; one holding a
    dot segment, an encoded slash or a backslash is refused (`invalid_url`), decoded or not."""
    decoded = _ESCAPE_RE.sub(lambda m: _escape(m.group(1)), path)
    plain = unquote(decoded)
    segments = plain.split("/")
    if "\\" in plain or any(seg in (".", "..") for seg in segments) or "%2F" in decoded or "%5C" in decoded:
        raise HandlerError(
            "invalid_url",
            f"{_safe(url or path)!r}: a path with '.' or '..' segments, an encoded '/' or a backslash is not accepted "
            "(it would reach another location than the one named)",
        )
    return decoded.rstrip("/")


def _escape(hexpair: str) -> str:
    """One percent escape as RFC 3986 normalises it: an unreserved character decoded, others upper-case hex."""
    char = chr(int(hexpair, 16))
    return char if char in _UNRESERVED else f"%{hexpair.upper()}"


def under(url: str, root: str) -> bool:
    """Whether normalised `url` is `root` or a path below it (compared segment by segment, both normalised)."""
    return url == root or url.startswith(root + "/")


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
