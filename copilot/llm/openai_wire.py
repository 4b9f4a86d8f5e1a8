"""The chat-completions wire (the `openai` SDK): OpenAI, Azure OpenAI deployments and local OpenAI-compatible
servers (vLLM, Ollama, llama.cpp's server, LM Studio). The conversation is already in this shape; requests stream
(`stream_options.include_usage` for the token counts) unless MEDCOPILOT_STREAM=0."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai

from copilot.llm.convert import new_call_id, without_state
from copilot.llm.inflight import InFlight
from copilot.llm.profiles import ModelProfile, profile_for
from copilot.llm.providers import PROVIDERS
from copilot.llm.spec import ModelSpec
from copilot.llm.types import ChatRequest, ModelError, Reply, ToolCall, Usage, classify_status

NOT_A_STREAM = ("the service answered a streamed request with no events (a proxy sending whole replies?); "
                "asking again without streaming")


def _error(exc: Exception) -> ModelError:
    if isinstance(exc, openai.APIStatusError):
        return classify_status(exc.status_code, str(exc), exc.response.headers)
    if isinstance(exc, openai.APITimeoutError):
        return ModelError("retryable", f"timed out: {exc}")
    return ModelError("retryable", f"{type(exc).__name__}: {exc}")


def sdk_client(spec: ModelSpec, timeout_s: float) -> Any:
    """The `openai` SDK client of a spec: no retries of its own (ours are bounded by the round's deadline) and no
    redirect followed (a 3xx is an error naming its target, so no key or view is ever sent elsewhere)."""
    http = openai.DefaultHttpxClient(follow_redirects=False, timeout=timeout_s)
    if PROVIDERS[spec.provider].client == "azure":
        return openai.AzureOpenAI(azure_endpoint=spec.base_url or "", api_key=spec.api_key,
                                  api_version=spec.api_version, timeout=timeout_s, max_retries=0,
                                  http_client=http)  # fmt: skip
    return openai.OpenAI(base_url=spec.base_url, api_key=spec.api_key or "not-needed", timeout=timeout_s,
                         max_retries=0, http_client=http)  # fmt: skip


def sampling(profile: ModelProfile, request: ChatRequest) -> dict[str, Any]:
    """The sampling and length parameters the profile lets a chat-completions request carry (none it refuses)."""
    out: dict[str, Any] = {}
    if profile.temperature and request.temperature is not None:
        out["temperature"] = request.temperature
    if profile.id != "default":  # a known family: its own name of the output limit
        out[profile.max_tokens_param] = request.max_tokens
    if request.reasoning and (profile.reasoning or {}).get("kind") == "openai_effort":
        out["reasoning_effort"] = request.reasoning
    return out


class OpenAIChat:
    """One OpenAI-compatible service; `client` may be a ready SDK client (tests, a host's own)."""

    wire = "openai-chat"

    def __init__(self, spec: ModelSpec, timeout_s: float, stream: bool = True, client: Any = None) -> None:
        self.spec, self.stream = spec, stream
        self.profile = profile_for(spec.provider, spec.model)
        self.client = client or sdk_client(spec, timeout_s)
        self.inflight = InFlight()

    @property
    def base_url(self) -> str:
        return str(getattr(self.client, "base_url", "") or self.spec.base_url or "")

    def list_models(self) -> list[str]:
        try:
            return sorted(m.id for m in self.client.models.list())
        except (openai.APIError, openai.OpenAIError) as exc:
            raise _error(exc) from exc

    def abort(self) -> None:
        self.inflight.abort()

    def complete(self, request: ChatRequest, on_text: Callable[[str], None] | None = None) -> Reply:
        kwargs: dict[str, Any] = {"model": self.spec.model, "messages": without_state(request.messages),
                                  **sampling(self.profile, request)}  # fmt: skip
        if request.tools:
            kwargs["tools"] = [t.openai() for t in request.tools]
        try:
            if not self.stream:
                return self._whole(self.client.chat.completions.create(**kwargs))
            stream = self.client.chat.completions.create(**kwargs, stream=True,
                                                         stream_options={"include_usage": True})  # fmt: skip
            return self.inflight.read(stream, lambda s: self._streamed(s, on_text))
        except openai.OpenAIError as exc:
            raise _error(exc) from exc

    @staticmethod
    def _usage(usage: Any) -> Usage:
        if usage is None:
            return Usage()
        details = getattr(usage, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
        out = getattr(usage, "completion_tokens_details", None)
        reasoning = int(getattr(out, "reasoning_tokens", 0) or 0) if out is not None else 0
        return Usage(int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0), cached, reasoning)

    def _whole(self, response: Any) -> Reply:
        if isinstance(response, str | bytes) or not getattr(response, "choices", None):
            raise ModelError("malformed", "the service's reply has no choices")
        choice = response.choices[0]
        msg = choice.message
        calls = [ToolCall(c.id or new_call_id(), c.function.name, c.function.arguments or "")
                 for c in msg.tool_calls or []]  # fmt: skip
        if not (msg.content or calls):
            raise ModelError("malformed", f"the service's reply is empty (finish reason {choice.finish_reason})")
        return Reply(msg.content or "", calls, choice.finish_reason or "stop", self._usage(response.usage),
                     1 if msg.content else 0, model_version=getattr(response, "model", None))  # fmt: skip

    def _streamed(self, stream: Any, on_text: Callable[[str], None] | None) -> Reply:
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish, usage, events, version = "", Usage(), 0, None
        for chunk in stream:
            events += 1
            version = getattr(chunk, "model", None) or version
            if getattr(chunk, "usage", None) is not None:
                usage = self._usage(chunk.usage)
            for choice in chunk.choices or []:
                delta = choice.delta
                if delta is not None and delta.content:
                    text.append(delta.content)
                    if on_text is not None:
                        on_text(delta.content)
                for tc in (delta.tool_calls if delta is not None else None) or []:
                    slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = tc.id or slot["id"]
                    if tc.function is not None:
                        slot["name"] += tc.function.name or ""
                        slot["arguments"] += tc.function.arguments or ""
                if choice.finish_reason:
                    finish = choice.finish_reason
        if not events:
            self.stream = False  # the retry asks for a whole reply
            raise ModelError("malformed", NOT_A_STREAM)
        if not finish:
            raise ModelError("malformed", "the stream ended before the reply was complete (no finish reason)")
        tool_calls = [ToolCall(c["id"] or new_call_id(), c["name"], c["arguments"]) for _, c in sorted(calls.items())]
        if not (text or tool_calls):
            raise ModelError("malformed", f"the service's reply is empty (finish reason {finish})")
        return Reply("".join(text), tool_calls, finish, usage, len(text), model_version=version)
