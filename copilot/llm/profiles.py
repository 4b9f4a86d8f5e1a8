"""What each model service accepts and needs, as data (`resources/model_profiles.json`, versioned, with sources and
dates; a file named by MEDCOPILOT_MODEL_PROFILES overrides entries by id or adds new ones, matched first).

A profile answers, per model-id pattern: the wire, whether a temperature may be sent, the name of the output-token
limit, the reasoning control, images per request, context length, native tool calls or the text protocol. A model
no entry matches gets the conservative default and a warning (`ModelProfile.warning`).
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from copilot.resources import resources_dir

PROFILES_SETTING = "MEDCOPILOT_MODEL_PROFILES"
TOOL_PROTOCOLS = ("native", "text")


@dataclass(frozen=True)
class ModelProfile:
    """One service's rules for a family of models."""

    id: str
    version: str
    wire: str | None = None  # the wire the family is spoken on (None: the provider's own)
    temperature: bool = True  # whether a temperature may be sent at all
    max_tokens_param: str = "max_tokens"
    reasoning: dict[str, Any] | None = None  # {"kind": openai_effort | gemini_level | anthropic_thinking, "levels"}
    max_images: int = 8
    context_tokens: int | None = None
    tools: str = "native"
    tokens_per_image: int = 1000
    serve: dict[str, str] = field(default_factory=dict)
    backbones: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    warning: str | None = None

    def record(self) -> dict[str, Any]:
        """What a trace header and a result row keep of the profile."""
        return {"id": self.id, "version": self.version, "wire": self.wire, "temperature": self.temperature,
                "reasoning": (self.reasoning or {}).get("kind"), "max_images": self.max_images,
                "context_tokens": self.context_tokens, "tools": self.tools}  # fmt: skip

    def reasoning_levels(self) -> tuple[str, ...]:
        return tuple((self.reasoning or {}).get("levels") or ())


class ProfileError(ValueError):
    """A reasoning level or tool protocol the profile does not offer (the message lists what it does)."""


def _entry(raw: dict[str, Any], version: str) -> ModelProfile:
    return ModelProfile(
        id=str(raw["id"]), version=version, wire=raw.get("wire"), temperature=bool(raw.get("temperature", True)),
        max_tokens_param=str(raw.get("max_tokens_param", "max_tokens")), reasoning=raw.get("reasoning"),
        max_images=int(raw.get("max_images", 8)), context_tokens=raw.get("context_tokens"),
        tools=str(raw.get("tools", "native")), tokens_per_image=int(raw.get("tokens_per_image", 1000)),
        serve=dict(raw.get("serve") or {}), backbones=tuple(raw.get("backbones") or ()),
        sources=tuple(raw.get("sources") or ()),
    )  # fmt: skip


@lru_cache(maxsize=4)
def _table(override: str | None) -> tuple[str, ModelProfile, tuple[tuple[tuple[str, ...], tuple[str, ...],
                                                                            ModelProfile], ...]]:  # fmt: skip
    data = json.loads((resources_dir() / "model_profiles.json").read_text(encoding="utf-8"))
    version = str(data["version"])
    entries: list[dict[str, Any]] = list(data["profiles"])
    if override:
        user = json.loads(Path(override).read_text(encoding="utf-8"))
        mine = user.get("profiles", []) if isinstance(user, dict) else []
        ids = {e["id"] for e in mine}
        entries = [*mine, *(e for e in entries if e["id"] not in ids)]
        version = f"{version}+{user.get('version', 'local')}"
    rows = tuple((tuple(e.get("providers") or ()), tuple(p.lower() for p in e.get("match") or ()), _entry(e, version))
                 for e in entries)  # fmt: skip
    return version, _entry(data["default"], version), rows


def all_profiles() -> list[ModelProfile]:
    return [p for _, _, p in _table(os.environ.get(PROFILES_SETTING) or None)[2]]


def profile_for(provider: str, model: str) -> ModelProfile:
    """The profile of `model` on `provider`: the first entry whose patterns match the model id (or its last path
    segment), case-insensitive; else the default, with a warning naming how to add one."""
    _, default, rows = _table(os.environ.get(PROFILES_SETTING) or None)
    name = (model or "").lower()
    names = {name, name.rsplit("/", 1)[-1]}
    for providers, patterns, profile in rows:
        if providers and provider not in providers:
            continue
        if any(fnmatch.fnmatchcase(n, p) for n in names for p in patterns):
            return profile
    warning = (f"no model profile matches {provider}:{model or '(server default)'}: using the conservative default "
               f"(at most {default.max_images} images per request, native tool calls); add one in a file named by "
               f"{PROFILES_SETTING} (docs/models.md)")  # fmt: skip
    return replace(default, warning=warning)


def check_reasoning(profile: ModelProfile, level: str | None) -> str | None:
    """`level` when the profile offers it (None: the service's default); ProfileError otherwise."""
    if level in (None, "", "default"):
        return None
    levels = profile.reasoning_levels()
    if not levels:
        raise ProfileError(f"profile {profile.id} has no reasoning control; leave --reasoning out")
    if level not in levels:
        raise ProfileError(f"profile {profile.id} offers reasoning {', '.join(levels)}, not {level!r}")
    return level


def check_tool_protocol(value: str | None, profile: ModelProfile) -> str:
    """The tool protocol a run uses: the one asked for, else the profile's."""
    chosen = value or profile.tools
    if chosen not in TOOL_PROTOCOLS:
        raise ProfileError(f"tool protocol must be one of {', '.join(TOOL_PROTOCOLS)}, not {chosen!r}")
    return chosen


def configuration(profile: ModelProfile, wire: str, temperature: float | None, reasoning: str | None,
                  tool_protocol: str, max_images: int | None) -> str:  # fmt: skip
    """The model configuration as a result key names it: runs that differ in any part never pool."""
    return (f"{profile.id}@{profile.version};wire={wire};t={temperature};reasoning={reasoning or 'default'};"
            f"tools={tool_protocol};images={max_images}")
