"""A model policy made ready to send: the provider's wire for a resolved spec, and errors that say what to do."""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from copilot.llm.calls import ChatModel
from copilot.llm.profiles import profile_for
from copilot.llm.providers import PROVIDERS
from copilot.llm.spec import ModelSpec, SpecError
from copilot.llm.text_tools import TextTools
from copilot.llm.types import ModelError, image_limit_of
from copilot.trace.redact import redact_text

IMAGE_BUDGET_SETTING = "MEDCOPILOT_KEEP_IMAGES"
WIRE_SETTING = "MEDCOPILOT_WIRE"  # `chat`: chat completions even where the profile names the Responses API
RESPONSES = "copilot.llm.responses_wire:OpenAIResponses"


def wire_class(spec: ModelSpec, wire: str | None = None) -> Any:
    """The wire class for a spec: OpenAI's own service speaks the Responses API to the models whose profile says so
    (GPT-5.x, o-series); Azure deployments and local or other OpenAI-compatible servers keep chat completions."""
    provider = PROVIDERS[spec.provider]
    profile = profile_for(spec.provider, spec.model)
    chosen = wire or profile.wire
    own = provider.own_host
    own_service = own is not None and (not spec.base_url or own in (urlsplit(spec.base_url).hostname or ""))
    if chosen == "openai-responses" and (own_service or wire == "openai-responses"):
        module, _, cls = RESPONSES.partition(":")
        return getattr(importlib.import_module(module), cls)
    return provider.wire_class()


def connect(
    spec: ModelSpec, timeout_s: float, stream: bool = True, client: Any = None, tool_protocol: str = "native",
    wire: str | None = None,
) -> tuple[ModelSpec, ChatModel]:  # fmt: skip
    """The wire for `spec` (tools in text when `tool_protocol` is `text`); a `local:` spec without a model takes the
    one its server lists first."""
    chosen: ChatModel = wire_class(spec, wire)(spec, timeout_s, stream, client)
    if not spec.model:
        try:
            listed = chosen.list_models()
        except ModelError as exc:
            where = redact_text(spec.base_url or "")
            raise SpecError(f"{where} lists no models ({exc}); name one with --model") from exc
        if not listed:
            raise SpecError(f"{redact_text(spec.base_url or '')} serves no model; name one with --model")
        spec = replace(spec, model=listed[0])
        chosen = wire_class(spec, wire)(spec, timeout_s, stream, client)
    spec = replace(spec, wire=chosen.wire)
    if tool_protocol == "text":
        chosen = TextTools(chosen)
    return spec, chosen


def explain(error: ModelError, spec: ModelSpec, wire: ChatModel | None = None) -> str:
    """One line for the user: what failed and the setting that fixes it."""
    where = f"{spec.provider} model service at {redact_text(spec.base_url or 'its default address')}"
    provider = PROVIDERS[spec.provider]
    if error.kind == "not_found":
        names = ""
        if wire is not None:
            try:
                names = ", ".join(wire.list_models()[:12])
            except ModelError:
                names = ""
        listed = f"; it lists: {names}" if names else ""
        return f"{where} does not know the model {spec.model!r} (HTTP 404){listed} — choose one with --model"
    if error.kind == "auth":
        keys = " or ".join(provider.key_env) or "the key setting"
        return f"{where} refused the key (HTTP {error.status}): check {keys} (or {provider.key_env[0]}_FILE)"
    if error.kind == "context":
        return (
            f"{where}: the conversation is longer than the model's context (HTTP {error.status}); send fewer "
            f"images with {IMAGE_BUDGET_SETTING} (images kept per conversation, default 3) or ask a new question"
        )
    if error.kind == "image_limit":
        limit = image_limit_of(str(error))
        fewer = f"--max-images {limit}" if limit else "a lower --max-images"
        return (f"{where} takes fewer images per request than the conversation needs (HTTP {error.status}): start it "
                f"with more (vLLM: --limit-mm-per-prompt '{{\"image\": 8}}') or run with {fewer}")  # fmt: skip
    if error.kind == "tools_unsupported":
        return (f"{where} serves no tool calls (HTTP {error.status}): start it with its tool parser (vLLM: "
                "--enable-auto-tool-choice --tool-call-parser PARSER, docs/models.md) or run with --tool-protocol text")
    if error.kind == "malformed":
        return f"{where} sent a reply that cannot be read: {error}"
    if error.kind == "redirect":
        return f"{where} {error}"
    if error.kind == "cancelled":
        return "stopped by the clinician"
    if error.kind == "deadline":
        return f"{where} did not answer within the round's deadline (MEDCOPILOT_ROUND_DEADLINE_S)"
    if error.kind == "retryable" and error.status is None:
        return f"{where} is not reachable or timed out ({error}); check --base-url / {provider.base_url_env or 'URL'}"
    status = f"HTTP {error.status}" if error.status else "an error"
    detail = " ".join(str(error).split())[:200]
    return f"{where} answered {status}: {detail}"
