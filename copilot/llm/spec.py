"""The one parser of model policy specs: `PROVIDER[:MODEL]` (or `local:URL`) into what a request needs.

The key comes from the provider's environment variable or from a key file named by `VAR_FILE` (owner-only, else
refused) — never from the command line. A base URL carrying a secret (user:password@, `key=`/`token=` query
parameters) is refused: it would be written into traces, reports and error lines.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from copilot.llm.providers import PROVIDERS, Provider
from copilot.trace.redact import redact_text

SECRET_QUERY_NAMES = ("key", "api_key", "apikey", "api-key", "token", "access_token", "password", "secret", "sig")


class SpecError(ValueError):
    """A policy spec or model setting that cannot be used (the message names the fix)."""


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model policy: provider, model id, wire format, where to send, and the key (never printed)."""

    provider: str
    model: str
    wire: str
    base_url: str | None
    api_key: str = field(default="", repr=False)
    api_version: str | None = None

    @property
    def policy(self) -> str:
        return f"{self.provider}:{self.model}"

    def describe(self) -> dict[str, str | None]:
        """What a trace header and a result row record of the model (no key)."""
        return {"provider": self.provider, "model": self.model, "wire": self.wire, "base_url": self.base_url}


def provider_of(policy: str) -> Provider | None:
    """The provider a policy spec names, or None for an offline policy (`baseline`, `prior`, `scripted:FILE`)."""
    return PROVIDERS.get(policy.split(":", 1)[0])


def is_model_policy(policy: str) -> bool:
    return provider_of(policy) is not None


def model_policy_help() -> str:
    return " | ".join(p.spec_help for p in PROVIDERS.values())


def model_of(policy: str, model: str | None = None) -> str:
    """The model a policy runs, as result rows key it (`openai:gpt-x` → `gpt-x`; an offline policy is its own)."""
    if model:
        return model
    provider = provider_of(policy)
    if provider is None or ":" not in policy or provider.spec_form == "url":
        return policy
    return policy.split(":", 1)[1]


def check_url(url: str, what: str = "--base-url") -> str:
    """The URL unchanged, or SpecError when it is not http(s) or carries a secret."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(f"{what} must be an http(s) URL with a host, not {redact_text(url)!r}")
    if parts.username or parts.password:
        raise SpecError(f"{what} carries a user name or password: give the key in the environment instead "
                        f"({redact_text(url)})")  # fmt: skip
    if any(k.lower() in SECRET_QUERY_NAMES for k, _ in parse_qsl(parts.query, keep_blank_values=True)):
        raise SpecError(f"{what} carries a key in its query: give it in the environment instead ({redact_text(url)})")
    return url


def read_key_file(path: str | Path) -> str:
    """A key file's first line; refused when others may read it (the chmod to run is named)."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"key file {p}: {exc.strerror or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SpecError(f"key file {p} is readable by other users: run `chmod 600 {p}`")
    return text.splitlines()[0].strip() if text.strip() else ""


def resolve_key(provider: Provider, env: Mapping[str, str]) -> str:
    """The provider's key from its environment variable, or from the file its `VAR_FILE` names; "" if none."""
    for var in provider.key_env:
        if env.get(var):
            return env[var]
        if env.get(f"{var}_FILE"):
            return read_key_file(env[f"{var}_FILE"])
    return ""


def parse_policy(
    policy: str, model: str | None = None, base_url: str | None = None, env: Mapping[str, str] | None = None
) -> ModelSpec:
    """Resolve a model policy spec with the command line's `--model` / `--base-url` over the environment."""
    env = os.environ if env is None else env
    provider = provider_of(policy)
    if provider is None:
        raise SpecError(f"{policy!r} is not a model policy; use {model_policy_help()}")
    rest = policy.split(":", 1)[1] if ":" in policy else ""
    if provider.spec_form == "url":  # the spec names the server; the model comes from --model or its listing
        base_url = base_url or rest or None
        chosen = model or env.get("MEDCOPILOT_MODEL") or ""
    else:
        chosen = model or rest or env.get("MEDCOPILOT_MODEL") or provider.default_model or ""
        base_url = base_url or (env.get(provider.base_url_env) if provider.base_url_env else None) or None
    if provider.base_url_hint and not base_url:
        raise SpecError(provider.base_url_hint)
    if provider.model_hint and not chosen:
        raise SpecError(provider.model_hint)
    if base_url:
        check_url(base_url)
    key = resolve_key(provider, env)
    version = None
    if provider.api_version_env:
        version = env.get(provider.api_version_env, provider.api_version_default or "") or None
    return ModelSpec(provider.name, chosen, provider.wire, base_url, key, version)


def service_problem(spec: ModelSpec, env: Mapping[str, str] | None = None) -> str | None:
    """Why no request can be made with this spec (one line naming the setting), or None."""
    provider = PROVIDERS[spec.provider]
    if provider.unconfigured and not spec.base_url and not spec.api_key:
        return provider.unconfigured
    if provider.needs_key and not spec.api_key:
        names = " or ".join(provider.key_env)
        return f"no key for {spec.provider}: set {names} (or {provider.key_env[0]}_FILE, a chmod 600 file)"
    return None
