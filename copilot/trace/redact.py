"""Secrets never reach a trace or a log: redaction applied to every event before it is hashed and written.

Three rules, all applied by `TraceRecorder.record` (so every route and every caller is covered), and by
`redact_text` wherever a URL is shown or printed:

- **By name**: the value of any mapping key that names a credential (`token`, `access_token`,
  `authorization`, `api_key`, `password`, `secret`, `cookie`, ...) becomes `[redacted]`, wherever it
  nests; so do `name=value` pairs of such names inside query strings and URLs (also `key=`, `pw=`, `sig=`).
- **In a URL**: its user-info (`scheme://user:password@host`) becomes `scheme://[redacted]@host`.
- **By shape**: `key=`, `pw=`, `sig=` … pairs in free text too, and provider API keys pasted anywhere (`sk-…` of
  OpenAI and Anthropic, `AIza…` of Google), whatever the key.
- **By value**: every secret registered with `register_secret` (the server's bearer token is registered when
  the server is made) is cut out of any string it appears in, whatever the key.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 4  # shorter values would cut ordinary words out of the trace
_NAME = re.compile(
    r"(?:^|[_\-.])(?:token|access[_\-]?token|auth|authorization|api[_\-]?key|apikey|password|passwd|secret|"
    r"cookie|set[_\-]cookie|credentials?|bearer)$",
    re.IGNORECASE,
)
_PAIR = re.compile(
    r"(?P<key>(?:[\w.\-]*[_\-.])?(?:token|access[_\-]?token|api[_\-]?key|apikey|password|passwd|secret|auth))"
    r"(?P<sep>=|%3D)(?P<value>[^&#\s\"']*)",
    re.IGNORECASE,
)
_QUERY_KEY = re.compile(r"(?P<key>[?&;](?:key|pw|pwd|pass|sig|signature|code))(?P<sep>=|%3D)(?P<value>[^&#\s\"']*)",
                        re.IGNORECASE)  # fmt: skip
_FREE_KEY = re.compile(r"(?P<key>(?<![\w.\-])(?:key|pw|pwd|pass|sig|signature))(?P<sep>=|%3D)(?P<value>[^&#\s\"',;]+)",
                       re.IGNORECASE)  # fmt: skip  # `key=…` in free text (a pasted command line, a note)
# provider API keys pasted anywhere, by their published shapes: OpenAI / Anthropic `sk-…`, Google `AIza…`
_PROVIDER_KEY = re.compile(r"\b(?:sk-[A-Za-z0-9][A-Za-z0-9_\-]{19,}|AIza[0-9A-Za-z_\-]{35})")
_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.\-]*://)(?P<userinfo>[^/?#@\s\"'<>]+)@", re.IGNORECASE)
_BEARER = re.compile(r"(?P<scheme>\bBearer\s+)(?P<value>[^\s\"',;]+)", re.IGNORECASE)
_SECRETS: set[str] = set()
_ORDERED: tuple[str, ...] = ()  # the registered secrets, longest first (replaced whole, so read without the lock)
_GENERATION = 0  # counts registrations: what `_key` remembers is keyed by it, so a new secret is never missed
_LOCK = threading.Lock()
_PLAIN = (int, float, bool, type(None))  # values that cannot hold a secret: returned as they are
KEY_MEMO_CHARS = 128  # keys up to this long are remembered (`_key`); longer ones, rare, are read each time


def register_secret(value: str | None) -> None:
    """Cut this value out of every string of every later trace event (e.g. the server's token)."""
    global _ORDERED, _GENERATION
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _LOCK:
            _SECRETS.add(value)
            _ORDERED = tuple(sorted(_SECRETS, key=len, reverse=True))
            _GENERATION += 1


def secret_name(key: str) -> bool:
    """Whether a mapping key names a credential."""
    return bool(_NAME.search(key.strip()))


def redact_text(text: str) -> str:
    """A string with registered secrets, `key=value` credentials of query strings and bearer values removed."""
    for secret in _ORDERED:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if "=" in text or "%3D" in text or "%3d" in text:
        text = _PAIR.sub(lambda m: f"{m['key']}{m['sep']}{REDACTED}", text)
        text = _QUERY_KEY.sub(lambda m: f"{m['key']}{m['sep']}{REDACTED}", text)
        text = _FREE_KEY.sub(lambda m: f"{m['key']}{m['sep']}{REDACTED}", text)
    if "sk-" in text or "AIza" in text:
        text = _PROVIDER_KEY.sub(REDACTED, text)
    if "@" in text and "://" in text:
        text = _USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    if "earer" in text:
        text = _BEARER.sub(lambda m: f"{m['scheme']}{REDACTED}", text)
    return text


@lru_cache(maxsize=4096)
def _key(key: str, generation: int) -> tuple[str, bool]:
    """A mapping key as written (`redact_text`) and whether it names a credential, remembered per generation of
    the registered secrets (`generation` is only part of what is remembered): a trace repeats a few hundred short
    keys, and what is remembered stays within 4096 keys of `KEY_MEMO_CHARS`."""
    return redact_text(key), secret_name(key)


def _redact_mapping(obj: dict[Any, Any]) -> dict[Any, Any]:
    """`redact` of a mapping: keys through `_key`, values naming a credential replaced, numbers kept as they are."""
    out: dict[Any, Any] = {}
    generation = _GENERATION
    for k, v in obj.items():
        if isinstance(k, str):
            short = type(k) is str and len(k) <= KEY_MEMO_CHARS
            key, secret = _key(k, generation) if short else (redact_text(k), secret_name(k))
            out[key] = REDACTED if secret else v if type(v) in _PLAIN else redact(v)
        else:
            out[k] = v if type(v) in _PLAIN else redact(v)
    return out


def redact(obj: Any) -> Any:
    """A copy of a JSON-like value with every secret removed (by key name and by registered value). Every string
    and key is read; numbers pass untouched (a list of coordinates is copied without a look at each)."""
    kind = type(obj)
    if kind in _PLAIN:
        return obj
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, dict):
        return _redact_mapping(obj)
    if isinstance(obj, (list, tuple)):
        if all(type(v) in _PLAIN for v in obj):
            return list(obj)
        return [redact(v) for v in obj]
    return obj
