"""The clinician's explicit opt-in before anything leaves the machine: per model service (its URL without user-info
or query) and per kind of data (`text`: questions, the study's text with identifiers removed, tool results;
`views`: pictures rendered from the study), asked once, remembered, revocable (`medcopilot optin`). A service on
this machine (loopback) needs none. The same file remembers the series the clinician chose to send although they
may carry burnt-in patient details (by a hash of the series UID). File: `MEDCOPILOT_OPTIN`, else
`$XDG_CONFIG_HOME/medcopilot/optin.json`, owner-only.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from copilot.privatefs import private_dir, write_private

KINDS = {"text": "your questions, the study's inventory and tool results, with patient identifiers removed",
         "views": "pictures rendered from the study (slices or slide fields, with their corner text)"}  # fmt: skip
ENV = "MEDCOPILOT_OPTIN"

Ask = Callable[[str], bool]


class OptInNeeded(ValueError):
    """Nothing may be sent yet: the clinician has not opted in (the message says what and how)."""


def optin_path() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "medcopilot" / "optin.json"


def is_local(base_url: str | None) -> bool:
    """Whether a model service URL is on this machine (loopback)."""
    host = urlsplit(base_url or "https://api.openai.com/v1").hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def service_url(settings: Any) -> str:
    """The URL a model policy's settings send to (the provider's own when none is set)."""
    from copilot.llm.providers import PROVIDERS

    spec = settings.spec()
    return str(spec.base_url or PROVIDERS[spec.provider].default_base_url or "https://api.openai.com/v1")


def service_key(base_url: str) -> str:
    """A service as remembered: scheme, host and port in lower case and the path, never user-info or query."""
    u = urlsplit(base_url.strip())
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"not a model service URL (http or https with a host): {base_url!r}")
    port = f":{u.port}" if u.port and u.port != {"http": 80, "https": 443}[u.scheme] else ""
    return f"{u.scheme}://{u.hostname.lower()}{port}{u.path.rstrip('/')}"


def _read() -> dict[str, Any]:
    try:
        data = json.loads(optin_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(data: dict[str, Any]) -> Path:
    path = optin_path()
    private_dir(path.parent)
    write_private(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def granted(base_url: str) -> set[str]:
    """The kinds of data the clinician allowed to go to a service."""
    entry = _read().get("services", {}).get(service_key(base_url), {})
    return {k for k in entry.get("kinds", []) if k in KINDS} if isinstance(entry, dict) else set()


def grant(base_url: str, kinds: Iterable[str]) -> Path:
    """Remember that these kinds may go to the service (added to what was allowed)."""
    wanted = set(kinds)
    unknown = wanted - set(KINDS)
    if unknown or not wanted:
        raise ValueError(f"kinds of data are {', '.join(KINDS)}; not {', '.join(sorted(unknown)) or 'none'}")
    data = _read()
    key = service_key(base_url)
    services = data.setdefault("services", {})
    services[key] = {"kinds": sorted(wanted | granted(base_url)), "since": time.strftime("%Y-%m-%d %H:%M")}
    return _write(data)


def revoke(base_url: str) -> bool:
    """Forget a service's opt-in (True when there was one)."""
    data = _read()
    found = data.get("services", {}).pop(service_key(base_url), None) is not None
    if found:
        _write(data)
    return found


def services() -> dict[str, list[str]]:
    """Every service opted in, with its kinds."""
    return {k: list(v.get("kinds", [])) for k, v in _read().get("services", {}).items() if isinstance(v, dict)}


def question(base_url: str, kinds: Iterable[str]) -> str:
    """What the opt-in dialog says."""
    what = "\n".join(f"  - {k}: {KINDS[k]}" for k in kinds)
    return (
        f"Send study data to the model service at {service_key(base_url)}? It is not on this machine.\n"
        f"It would receive:\n{what}\nNothing is sent unless you agree. Your answer is remembered for this service; "
        f"withdraw it with `medcopilot optin revoke {service_key(base_url)}`."
    )


def ensure(base_url: str, kinds: Iterable[str], ask: Ask | None) -> None:
    """Raise OptInNeeded unless the service is local or the clinician opted in to every kind (asked now, through
    `ask`, when they have not been; a yes is remembered)."""
    wanted = [k for k in KINDS if k in set(kinds)]
    if is_local(base_url):
        return
    missing = [k for k in wanted if k not in granted(base_url)]
    if not missing:
        return
    if ask is not None and ask(question(base_url, missing)):
        grant(base_url, missing)
        return
    raise OptInNeeded(
        f"nothing was sent: you have not agreed to send {' and '.join(missing)} to {service_key(base_url)}; "
        f"agree when asked, or run `medcopilot optin allow {service_key(base_url)}`"
    )


def series_key(series_uid: str) -> str:
    return hashlib.sha256(series_uid.encode("utf-8")).hexdigest()[:24]


def burned_in_allowed(series_uid: str) -> bool:
    """Whether the clinician chose to send a series that may carry burnt-in patient details."""
    return series_key(series_uid) in _read().get("burned_in", [])


def allow_burned_in(series_uid: str) -> Path:
    data = _read()
    data["burned_in"] = sorted({*data.get("burned_in", []), series_key(series_uid)})
    return _write(data)
