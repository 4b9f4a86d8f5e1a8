"""The model providers MedCopilot speaks to, one entry each: wire format, where the key and base URL come from.

Adding a provider is one wire module (a class with `complete`, `abort`, `list_models`) plus one `register` call
here. The policy spec `PROVIDER[:MODEL]` names an entry (`openai:gpt-4o`, `anthropic:claude-sonnet-4-5`,
`gemini:gemini-2.5-flash`, `azure:DEPLOYMENT`, `local:URL`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Provider:
    """One provider: its wire module and class, the environment it reads, its defaults."""

    name: str
    wire: str  # openai-chat | anthropic-messages | gemini
    implementation: str  # "module:Class" of the wire
    key_env: tuple[str, ...]  # environment variables holding the key, first found wins (or VAR_FILE: a key file)
    base_url_env: str | None
    default_base_url: str | None
    default_model: str | None
    needs_key: bool
    describe: str

    def wire_class(self) -> Any:
        module, _, cls = self.implementation.partition(":")
        return getattr(importlib.import_module(module), cls)


PROVIDERS: dict[str, Provider] = {}


def register(provider: Provider) -> None:
    """Add a provider; a second one of the same name is refused (ValueError)."""
    if provider.name in PROVIDERS:
        raise ValueError(f"model provider {provider.name!r} is already registered")
    if not provider.describe.strip():
        raise ValueError(f"model provider {provider.name!r} has no description")
    PROVIDERS[provider.name] = provider


register(Provider("openai", "openai-chat", "copilot.llm.openai_wire:OpenAIChat", ("OPENAI_API_KEY",),
                  "OPENAI_BASE_URL", "https://api.openai.com/v1", "gpt-4o-mini", False,
                  "OpenAI's chat completions, or any OpenAI-compatible server given by --base-url"))  # fmt: skip
register(Provider("azure", "openai-chat", "copilot.llm.openai_wire:OpenAIChat", ("AZURE_OPENAI_API_KEY",),
                  "AZURE_OPENAI_ENDPOINT", None, None, True,
                  "an Azure OpenAI deployment (azure:DEPLOYMENT; endpoint in AZURE_OPENAI_ENDPOINT)"))  # fmt: skip
register(Provider("local", "openai-chat", "copilot.llm.openai_wire:OpenAIChat", ("LOCAL_MODEL_API_KEY",),
                  None, None, None, False,
                  "an in-house model server (vLLM, Ollama, llama.cpp, LM Studio): local:URL"))  # fmt: skip
register(Provider("anthropic", "anthropic-messages", "copilot.llm.anthropic_wire:AnthropicMessages",
                  ("ANTHROPIC_API_KEY",), "ANTHROPIC_BASE_URL", "https://api.anthropic.com", "claude-sonnet-4-5",
                  True, "Anthropic's Messages API (Claude models)"))  # fmt: skip
register(Provider("gemini", "gemini", "copilot.llm.gemini_wire:GeminiChat", ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
                  "GEMINI_BASE_URL", "https://generativelanguage.googleapis.com", "gemini-2.5-flash", True,
                  "Google's Gemini API through google-genai"))  # fmt: skip
