"""The model providers MedCopilot speaks to, one declaration each: wire, where the key and base URL come from, and
every fact the rest of the product asks of a provider (hosted or in-house, how its spec names a model, what must be
configured, its OpenTelemetry name), so no list of providers is kept anywhere else.

Providers are a plug-in group, `medcopilot.providers` (the core's five are entry points of `pyproject.toml` too): a
package adds one with a wire module (a class with `complete`, `abort`, `list_models`) and an entry point whose object
is its `Provider`. `PROVIDERS` reads the group on first use; `register` adds one in-process. The policy spec
`PROVIDER[:MODEL]` names an entry (`openai:gpt-5.5`, `anthropic:claude-opus-4-7`, `gemini:gemini-3.1-pro-preview`,
`azure:DEPLOYMENT`, `local:URL`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from copilot import plugins

PROVIDERS_GROUP = plugins.PROVIDERS_GROUP


@dataclass(frozen=True)
class Provider:
    """One provider: its wire module and class, the environment it reads, its defaults and facts."""

    name: str
    wire: str  # openai-chat | anthropic-messages | gemini (a profile may name another of the same SDK)
    implementation: str  # "module:Class" of the wire
    key_env: tuple[str, ...]  # environment variables holding the key, first found wins (or VAR_FILE: a key file)
    base_url_env: str | None
    default_base_url: str | None
    default_model: str | None
    needs_key: bool
    describe: str
    hosted: bool = True  # a vendor's service (its models closed unless declared), not a server of one's own
    otel_name: str = ""  # gen_ai.provider.name of the OpenTelemetry GenAI conventions (default: the name)
    spec_form: str = "model"  # what follows `NAME:` in a spec: a model id, or (`url`) the server's address
    base_url_hint: str | None = None  # set when a base URL must be given: the sentence saying how
    model_hint: str | None = None  # set when a model must be named: the sentence saying how
    api_version_env: str | None = None  # a service with API versions (Azure): the variable, default below
    api_version_default: str | None = None
    client: str = "openai"  # the `openai` SDK client class a chat-completions wire builds: openai | azure
    own_host: str | None = None  # its own service's host, where the profile's wire (the Responses API) is spoken
    unconfigured: str | None = None  # the problem when neither a base URL nor a key is set (None: not a problem)

    def wire_class(self) -> Any:
        module, _, cls = self.implementation.partition(":")
        return getattr(importlib.import_module(module), cls)

    @property
    def spec_help(self) -> str:
        return f"{self.name}:URL" if self.spec_form == "url" else f"{self.name}[:MODEL]"

    @property
    def telemetry_name(self) -> str:
        return self.otel_name or self.name


class _Registry(Mapping[str, Provider]):
    """The providers by name: the plug-in group's, read once on first use, and those registered in-process."""

    def __init__(self) -> None:
        self._found: dict[str, Provider] | None = None
        self._added: dict[str, Provider] = {}

    def _all(self) -> dict[str, Provider]:
        if self._found is None:
            self._found = {}  # set first: a provider module that reads the registry while it loads sees it empty
            found = plugins.descriptors(PROVIDERS_GROUP, Provider)
            for name, provider in found.items():
                problem = _problem(provider)
                if problem:
                    plugins.refuse(PROVIDERS_GROUP, name, ValueError(problem))
                else:
                    self._found[name] = provider
        return {**self._found, **self._added}

    def __getitem__(self, name: str) -> Provider:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def add(self, provider: Provider) -> None:
        self._added[provider.name] = provider


PROVIDERS = _Registry()


def _problem(provider: Provider) -> str | None:
    if not provider.describe.strip():
        return f"model provider {provider.name!r} has no description"
    if provider.spec_form not in ("model", "url"):
        return f"model provider {provider.name!r}: spec_form is model or url, not {provider.spec_form!r}"
    return None


def register(provider: Provider) -> None:
    """Add a provider in-process; a name taken (the core's or a plug-in's) or a missing description is refused
    (ValueError) and the registry stays as it was."""
    if provider.name in PROVIDERS:
        raise ValueError(f"model provider {provider.name!r} is already registered")
    problem = _problem(provider)
    if problem:
        raise ValueError(problem)
    PROVIDERS.add(provider)
    plugins.declare(PROVIDERS_GROUP, provider.name)


OPENAI = Provider(
    "openai", "openai-chat", "copilot.llm.openai_wire:OpenAIChat", ("OPENAI_API_KEY",), "OPENAI_BASE_URL",
    "https://api.openai.com/v1", "gpt-5.4-mini", False,
    "OpenAI's API (the Responses API for GPT-5.x and the o-series, chat completions otherwise), or any "
    "OpenAI-compatible server given by --base-url", otel_name="openai", own_host="api.openai.com",
    unconfigured="no model service configured: set OPENAI_BASE_URL (or --base-url) to an OpenAI-compatible server, "
                 "or OPENAI_API_KEY for https://api.openai.com/v1 (docs/models.md)",
)  # fmt: skip
AZURE = Provider(
    "azure", "openai-chat", "copilot.llm.openai_wire:OpenAIChat", ("AZURE_OPENAI_API_KEY",), "AZURE_OPENAI_ENDPOINT",
    None, None, True, "an Azure OpenAI deployment (azure:DEPLOYMENT; endpoint in AZURE_OPENAI_ENDPOINT)",
    otel_name="azure.ai.openai", client="azure", api_version_env="OPENAI_API_VERSION", api_version_default="2024-10-21",
    base_url_hint="azure: set AZURE_OPENAI_ENDPOINT (https://RESOURCE.openai.azure.com) or --base-url",
    model_hint="azure: name the deployment, e.g. azure:gpt-5-4-mini-prod",
)  # fmt: skip
LOCAL = Provider(
    "local", "openai-chat", "copilot.llm.openai_wire:OpenAIChat", ("LOCAL_MODEL_API_KEY",), None, None, None, False,
    "an in-house model server (vLLM, SGLang, Ollama, llama.cpp, LM Studio): local:URL", hosted=False,
    otel_name="openai", spec_form="url",
    base_url_hint="local: name the server, e.g. local:http://127.0.0.1:11434/v1 (Ollama)",
)  # fmt: skip
ANTHROPIC = Provider(
    "anthropic", "anthropic-messages", "copilot.llm.anthropic_wire:AnthropicMessages", ("ANTHROPIC_API_KEY",),
    "ANTHROPIC_BASE_URL", "https://api.anthropic.com", "claude-sonnet-4-6", True,
    "Anthropic's Messages API (Claude models)", otel_name="anthropic",
)  # fmt: skip
GEMINI = Provider(
    "gemini", "gemini", "copilot.llm.gemini_wire:GeminiChat", ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "GEMINI_BASE_URL",
    "https://generativelanguage.googleapis.com", "gemini-3-flash-preview", True,
    "Google's Gemini API through google-genai", otel_name="gcp.gemini",
)  # fmt: skip
