"""Google's Gemini API (the `google-genai` SDK), streamed.

Translation from the conversation: system messages → `system_instruction`; roles user/assistant → user/model;
`image_url` data URLs → inline-data parts; an assistant's `tool_calls` → `function_call` parts (id kept);
`tool` messages → `function_response` parts in a user turn, named by the call they answer, the result object
under `response` (text that is not a JSON object as `{"result": text}`); consecutive turns of one role merged;
tools → one Tool of function declarations with their JSON schema (`parameters_json_schema`); automatic function
calling off. A model turn the service produced goes back as the parts it returned, exactly (thought signatures on
function calls and text, parallel calls as returned, across rounds): Gemini 3 refuses a history missing any signature
it gave. The thinking level comes from the profile or `--reasoning`; no temperature to a model whose profile keeps
the default.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from google import genai
from google.genai import errors, types

from copilot.llm.convert import arguments_object, data_url, new_call_id, own_items, parts_of, system_text, tool_names
from copilot.llm.inflight import InFlight
from copilot.llm.profiles import profile_for
from copilot.llm.spec import ModelSpec
from copilot.llm.types import ChatRequest, Message, ModelError, Reply, ToolCall, Usage, classify_status

FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}
WIRE = "gemini"


def _error(exc: Exception) -> ModelError:
    if isinstance(exc, errors.APIError):
        response = getattr(exc, "response", None)
        return classify_status(int(exc.code or 500), f"{exc.code} {exc.message or exc}",
                               getattr(response, "headers", None))  # fmt: skip
    return ModelError("retryable", f"{type(exc).__name__}: {exc}")


def _transport(exc: BaseException) -> bool:
    """A fault of the connection (timeout, reset, refused), whichever HTTP library the SDK runs on."""
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "aiohttp")


def _result_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return {"result": text}
    return value if isinstance(value, dict) else {"result": value}


def to_contents(messages: list[Message]) -> list[types.Content]:
    """The conversation as Gemini contents (system left out: it goes in `system_instruction`)."""
    names: dict[str, str] = {}
    contents: list[types.Content] = []
    for m in messages:
        names.update(tool_names([m]))  # the latest call of an id names its result (ids may repeat across rounds)
        if m["role"] == "system":
            continue
        parts: list[types.Part] = []
        if m["role"] == "tool":
            role = "user"
            parts.append(types.Part(function_response=types.FunctionResponse(
                id=m["tool_call_id"], name=names.get(m["tool_call_id"], ""),
                response=_result_object(str(m.get("content") or "")))))  # fmt: skip
        elif m["role"] == "assistant" and (own := own_items(m, WIRE)) is not None:
            role = "model"
            parts = [types.Part.model_validate(p) for p in own]
        else:
            role = "model" if m["role"] == "assistant" else "user"
            for part in parts_of(m.get("content")):
                if part.get("type") == "text":
                    parts.append(types.Part(text=part["text"]))
                elif part.get("type") == "image_url":
                    mime, data = data_url(part["image_url"]["url"])
                    parts.append(types.Part.from_bytes(data=base64.b64decode(data), mime_type=mime))
            parts += [types.Part(function_call=types.FunctionCall(
                id=c["id"], name=c["function"]["name"], args=arguments_object(c["function"]["arguments"])))
                for c in m.get("tool_calls") or []]  # fmt: skip
        if not parts:
            continue
        if contents and contents[-1].role == role:
            contents[-1].parts = [*(contents[-1].parts or []), *parts]
        else:
            contents.append(types.Content(role=role, parts=parts))
    return contents


class GeminiChat:
    """Gemini models through google-genai (the Gemini Developer API, or a base URL given)."""

    wire = "gemini"

    def __init__(self, spec: ModelSpec, timeout_s: float, stream: bool = True, client: Any = None) -> None:
        self.spec = spec
        self.profile = profile_for(spec.provider, spec.model)
        options = types.HttpOptions(base_url=spec.base_url, timeout=int(timeout_s * 1000),
                                    retry_options=types.HttpRetryOptions(attempts=1),
                                    client_args={"follow_redirects": False})  # fmt: skip
        self.client = client or genai.Client(api_key=spec.api_key or "not-set", http_options=options)
        self.inflight = InFlight()

    def list_models(self) -> list[str]:
        try:
            return sorted((m.name or "").removeprefix("models/") for m in self.client.models.list())
        except errors.APIError as exc:
            raise _error(exc) from exc

    def abort(self) -> None:
        self.inflight.abort()

    def complete(self, request: ChatRequest, on_text: Callable[[str], None] | None = None) -> Reply:
        config = types.GenerateContentConfig(
            max_output_tokens=request.max_tokens, system_instruction=system_text(request.messages) or None,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )  # fmt: skip
        if self.profile.temperature and request.temperature is not None:
            config.temperature = request.temperature
        if request.reasoning and (self.profile.reasoning or {}).get("kind") == "gemini_level":
            config.thinking_config = types.ThinkingConfig(thinking_level=request.reasoning.upper())
        if request.tools:
            config.tools = [types.Tool(function_declarations=[
                types.FunctionDeclaration(name=t.name, description=t.description, parameters_json_schema=t.parameters)
                for t in request.tools])]  # fmt: skip
        try:
            stream = self.client.models.generate_content_stream(
                model=self.spec.model, contents=to_contents(request.messages), config=config
            )
            return self.inflight.read(stream, lambda s: self._read(s, on_text))
        except errors.APIError as exc:
            raise _error(exc) from exc
        except Exception as exc:  # transport faults surface as httpx / OS errors: retried like every wire's
            if _transport(exc):
                raise ModelError("retryable", f"{type(exc).__name__}: {exc}") from exc
            raise

    @staticmethod
    def _read(stream: Any, on_text: Callable[[str], None] | None) -> Reply:
        text: list[str] = []
        calls: list[ToolCall] = []
        raw: list[dict[str, Any]] = []
        usage, finish, chunks, version = Usage(), "", 0, None
        for chunk in stream:
            chunks += 1
            version = getattr(chunk, "model_version", None) or version
            meta = chunk.usage_metadata
            if meta is not None:
                thoughts = int(meta.thoughts_token_count or 0)
                usage = Usage(int(meta.prompt_token_count or 0), int(meta.candidates_token_count or 0) + thoughts,
                              int(meta.cached_content_token_count or 0), thoughts)  # fmt: skip
            for cand in chunk.candidates or []:
                if cand.finish_reason is not None:
                    reason = getattr(cand.finish_reason, "value", str(cand.finish_reason))
                    finish = FINISH.get(reason, reason.lower())
                for part in (cand.content.parts if cand.content is not None else None) or []:
                    raw.append(part.model_dump(mode="json", exclude_none=True))
                    if part.text and not part.thought:
                        text.append(part.text)
                        if on_text is not None:
                            on_text(part.text)
                    if part.function_call is not None:
                        fc = part.function_call
                        calls.append(ToolCall(fc.id or new_call_id(), fc.name or "",
                                              json.dumps(fc.args or {})))  # fmt: skip
        if not chunks:
            raise ModelError("malformed", "the service answered a streamed request with no events")
        if not finish:
            raise ModelError("malformed", "the stream ended before the reply was complete (no finish reason)")
        if not (text or calls):
            raise ModelError("malformed", f"the service's candidate is empty (finish reason {finish})")
        if calls:
            finish = "tool_calls"
        return Reply("".join(text), calls, finish, usage, len(text), {"wire": WIRE, "items": raw}, version)
