"""PACS credentials and TLS settings, from the environment or a config file; never written to a trace.

Environment (wins over the file): `MEDCOPILOT_PACS_TOKEN` (a bearer token) or `MEDCOPILOT_PACS_USER` with
`MEDCOPILOT_PACS_PASSWORD` (HTTP basic), `MEDCOPILOT_PACS_CA_BUNDLE` (a CA file for a private PKI).
File: `MEDCOPILOT_PACS_CONFIG` or `$XDG_CONFIG_HOME/medcopilot/pacs.json` (default `~/.config/…`), a JSON object
`{"servers": [{"url": "https://pacs.example.org/dicom-web", "token": "…"} | {"url": …, "username": …,
"password": …}, …]}` with an optional `"ca_bundle"` per server; the longest `url` that prefixes the service
root applies. TLS certificates are always verified. A config file that other users may read or write is refused
(`pacs_config`), naming the `chmod 600 FILE` to run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from copilot.errors import HandlerError
from copilot.pacs.errors import PacsError
from copilot.pacs.printable import printable
from copilot.privatefs import ExposedSecretsError, check_secret_file


@dataclass(frozen=True)
class Credentials:
    """How to authenticate to one PACS (`repr` shows no secret)."""

    token: str | None = None
    username: str | None = None
    password: str | None = None
    ca_bundle: str | None = None

    def __repr__(self) -> str:
        how = "bearer" if self.token else "basic" if self.username else "none"
        return f"Credentials({how}, ca_bundle={self.ca_bundle!r})"

    @property
    def scheme(self) -> str:
        return "bearer" if self.token else "basic" if self.username else "none"


def config_path() -> Path:
    """Where the PACS config file is read from."""
    if os.environ.get("MEDCOPILOT_PACS_CONFIG"):
        return Path(os.environ["MEDCOPILOT_PACS_CONFIG"])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "medcopilot" / "pacs.json"


def _from_file(root: str) -> dict[str, Any]:
    path = config_path()
    if not path.is_file():
        return {}
    try:
        check_secret_file(path, "PACS config file")
    except ExposedSecretsError as exc:
        raise HandlerError("pacs_config", str(exc)) from None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HandlerError("pacs_config", f"{path}: not a readable JSON file ({exc})") from None
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, list):
        raise HandlerError("pacs_config", f'{path}: expected {{"servers": [{{"url": …}}, …]}}')
    best: dict[str, Any] = {}
    for entry in servers:
        url = str(entry.get("url", "")).rstrip("/") if isinstance(entry, dict) else ""
        if url and (root == url or root.startswith(url + "/")) and len(url) > len(str(best.get("url", ""))):
            best = entry
    return best


def credentials_for(root: str) -> Credentials:
    """The credentials for a DICOMweb service root (environment first, then the config file)."""
    env = os.environ
    entry = _from_file(root)
    token = env.get("MEDCOPILOT_PACS_TOKEN") or None
    user = env.get("MEDCOPILOT_PACS_USER") or None
    password = env.get("MEDCOPILOT_PACS_PASSWORD")
    if token is None and user is None:
        token = entry.get("token") or None
        user, password = entry.get("username") or None, entry.get("password")
    ca = env.get("MEDCOPILOT_PACS_CA_BUNDLE") or entry.get("ca_bundle") or None
    if user is not None and password is None:
        raise HandlerError("pacs_config", "a PACS user name without a password (MEDCOPILOT_PACS_PASSWORD)")
    return Credentials(
        str(token) if token else None, str(user) if user else None, None if password is None else str(password),
        str(ca) if ca else None,
    )  # fmt: skip


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = -1
    return scheme, (parts.hostname or "").lower(), port


def redirect_guard(policy: str = "same-origin") -> Callable[..., Any]:
    """A response hook refusing (`pacs_redirect`) a redirect to another origin (scheme, host, port), or any
    redirect with the policy `none`; same-origin redirects are left to the caller to follow."""

    def hook(response: Any, *args: Any, **kwargs: Any) -> Any:
        if not response.is_redirect:
            return response
        target = urljoin(response.url, response.headers.get("Location", ""))
        if policy == "none" or _origin(target) != _origin(response.url):
            response.close()
            where = printable(_origin(target)[1], 80) or "?"
            raise PacsError(
                "pacs_redirect", f"the PACS redirected to {where}, another origin; not followed "
                f"(MEDCOPILOT_PACS_REDIRECTS={policy})" if policy != "none" else
                "the PACS answered with a redirect; not followed (MEDCOPILOT_PACS_REDIRECTS=none)",
            )  # fmt: skip
        return response

    return hook


def http_session(root: str, redirects: str = "same-origin", connections: int = 10) -> Any:
    """A `requests` session for a service root: its credentials attached, TLS verified (a CA bundle if set),
    redirects to another origin refused, up to `connections` kept open for requests made at once."""
    import requests

    class PacsSession(requests.Session):
        """A session whose configured CA bundle wins over REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE of the environment
        (requests would let those replace it); proxies from the environment still apply."""

        def merge_environment_settings(self, *args: Any, **kwargs: Any) -> Any:
            settings = super().merge_environment_settings(*args, **kwargs)
            if isinstance(self.verify, str):
                settings["verify"] = self.verify
            return settings

    creds = credentials_for(root)
    session = PacsSession()
    for scheme in ("http://", "https://"):
        session.mount(scheme, requests.adapters.HTTPAdapter(pool_maxsize=max(10, connections)))
    session.hooks["response"].append(redirect_guard(redirects))
    session.verify = creds.ca_bundle or True
    if creds.token:
        session.headers["Authorization"] = f"Bearer {creds.token}"
    elif creds.username:
        session.auth = (creds.username, creds.password or "")
    return session


def default_server() -> str:
    """The PACS a browser starts with: `MEDCOPILOT_PACS_URL`, else the first server of the config file, else ''."""
    if os.environ.get("MEDCOPILOT_PACS_URL"):
        return os.environ["MEDCOPILOT_PACS_URL"]
    path = config_path()
    try:
        servers = json.loads(path.read_text(encoding="utf-8")).get("servers") if path.is_file() else None
    except (OSError, ValueError, AttributeError):
        return ""
    first = servers[0] if isinstance(servers, list) and servers and isinstance(servers[0], dict) else {}
    return str(first.get("url", ""))
