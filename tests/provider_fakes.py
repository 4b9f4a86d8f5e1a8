"""Model services that enforce what their providers document, refusals included (each rule cites its page and the
date it was read). They play the same script of steps as `tests/fake_openai.py` (tool calls, final text):

- `ReasoningChat`: a GPT-5.x reasoning model on chat completions — platform.openai.com/docs/api-reference/chat/create
  and developers.openai.com/docs/guides/reasoning (read 2026-12-03): a temperature other than the default is refused
  400 `unsupported_value`, `max_tokens` 400 `unsupported_parameter` (use `max_completion_tokens`).
- `FakeResponses`: the same model on the Responses API (same pages): reasoning items with encrypted content precede
  each function call; with `store: false` a function call sent back without its reasoning item is refused 400.
- `StrictGemini`: Gemini 3 — ai.google.dev/gemini-api/docs/thought-signatures (read 2026-12-03): the first
  functionCall part of a step carries a thoughtSignature (parallel calls: only the first), a final text part too;
  a history whose functionCall part lacks the signature it was given is refused 400.
- `ThinkingAnthropic`: Claude with extended thinking — platform.claude.com/docs/en/build-with-claude/
  extended-thinking and /vision (read 2026-12-03): thinking blocks with signatures precede tool_use; during tool use
  the assistant turn must be sent back starting with its thinking block unmodified (else 400); more than 100 images
  per request are refused.
- `FakeVLLM`: vLLM's OpenAI-compatible server — docs.vllm.ai features/tool_calling and engine args (read
  2026-12-03): `--limit-mm-per-prompt` (400 "At most N image(s) may be provided in one request."), `--max-model-len`
  (400 "This model's maximum context length is …"), no tool parser (400 '"auto" tool choice requires
  --enable-auto-tool-choice and --tool-call-parser to be set'); without tools in a request it writes its calls as
  `<tool_call>` text, as a model prompted with the text protocol does.
- `JsonForStream`: a proxy that answers a streamed request with one JSON body.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fake_openai import Event, FakeAnthropic, FakeGemini, FakeOpenAI, Step, images_in, pieces


def _refusal(message: str, status: int = 400) -> Step:
    return {"status": status, "message": message}


class Enforcing(FakeOpenAI):
    """A fake whose `check(body)` may refuse a request (the script does not advance on a refusal)."""

    def check(self, body: dict[str, Any], handler_path: str) -> Step | None:
        return None

    def _next(self, body: dict[str, Any]) -> Step:
        refusal = self.check(body, self.paths[-1] if self.paths else "")
        if refusal is not None:
            with self._lock:
                self.requests.append(body)
                self.refusals.append(refusal["message"])
            return refusal
        return super()._next(body)

    def __init__(self, script: list[Step] | Callable[[dict[str, Any]], Step]) -> None:
        self.refusals: list[str] = []
        super().__init__(script)


class ReasoningChat(Enforcing):
    def __init__(self, script: list[Step]) -> None:
        super().__init__(script)
        self.models = ["gpt-5.5"]

    def check(self, body: dict[str, Any], path: str) -> Step | None:
        if "temperature" in body and body["temperature"] != 1:
            return _refusal(
                f"Unsupported value: 'temperature' does not support {body['temperature']} with this "
                "model. Only the default (1) value is supported. (code unsupported_value)"
            )
        if "max_tokens" in body:
            return _refusal(
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead. (code unsupported_parameter)"
            )
        return None


class FakeResponses(Enforcing):
    """`POST /v1/responses`, streamed as the Responses API's typed events."""

    def __init__(self, script: list[Step]) -> None:
        super().__init__(script)
        self.models = ["gpt-5.5"]
        self.issued: dict[str, str] = {}  # function call id → the encrypted content of the reasoning before it
        self.turn = 0

    def check(self, body: dict[str, Any], path: str) -> Step | None:
        if "temperature" in body and body["temperature"] != 1:
            return _refusal(
                f"Unsupported value: 'temperature' does not support {body['temperature']} with this "
                "model. Only the default (1) value is supported."
            )
        if "max_tokens" in body or "max_completion_tokens" in body:
            return _refusal("Unsupported parameter: the Responses API takes max_output_tokens.")
        items = body.get("input") or []
        for n, item in enumerate(items):
            if isinstance(item, dict) and item.get("type") == "function_call" and item.get("call_id") in self.issued:
                before = items[n - 1] if n else {}
                want = self.issued[item["call_id"]]
                first = next(
                    (
                        i
                        for i in items[:n]
                        if isinstance(i, dict) and i.get("type") == "reasoning" and i.get("encrypted_content") == want
                    ),
                    None,
                )
                if first is None and before.get("type") != "function_call":
                    return _refusal(
                        f"Item '{item['call_id']}' of type 'function_call' was provided without its "
                        "required 'reasoning' item."
                    )
        return None

    def streams(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def _response(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        self.turn += 1
        secret = f"enc-{self.turn}-" + hashlib.sha256(str(self.turn).encode()).hexdigest()[:12]
        output: list[dict[str, Any]] = [
            {"type": "reasoning", "id": f"rs_{self.turn}", "summary": [], "encrypted_content": secret}
        ]
        if step.get("content"):
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{self.turn}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": step["content"], "annotations": []}],
                }
            )
        for k, c in enumerate(step.get("tool_calls", [])):
            call_id = f"call_{self.turn}_{k}"
            self.issued[call_id] = secret
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{self.turn}_{k}",
                    "call_id": call_id,
                    "name": c["name"],
                    "arguments": c["arguments"],
                    "status": "completed",
                }
            )
        return {
            "id": f"resp_{self.turn}",
            "object": "response",
            "created_at": 0,
            "model": "gpt-5.5-2026-04-23",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 1000,
                "output_tokens": 80,
                "input_tokens_details": {"cached_tokens": 200},
                "output_tokens_details": {"reasoning_tokens": 30},
                "total_tokens": 1080,
            },
        }

    def whole(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        return self._response(body, step)

    def events(self, body: dict[str, Any], step: Step) -> list[Event]:
        done = self._response(body, step)
        out: list[Event] = [
            (
                "response.created",
                {
                    "type": "response.created",
                    "sequence_number": 0,
                    "response": {**done, "status": "in_progress", "output": []},
                },
            )
        ]
        for item in done["output"]:
            if item["type"] == "message":
                for p in pieces(item["content"][0]["text"], int(step.get("chunks", 4))):
                    out.append(
                        (
                            "response.output_text.delta",
                            {
                                "type": "response.output_text.delta",
                                "delta": p,
                                "item_id": item["id"],
                                "output_index": 1,
                                "content_index": 0,
                                "sequence_number": len(out),
                                "logprobs": [],
                            },
                        )
                    )
            out.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "item": item, "output_index": 0, "sequence_number": len(out)},
                )
            )
        out.append(
            ("response.completed", {"type": "response.completed", "response": done, "sequence_number": len(out)})
        )
        return out


def _same(sent: str | None, given: str | None) -> bool:
    """Two base64 signatures hold the same bytes (the standard and URL-safe alphabets are one to the API)."""
    if sent is None or given is None:
        return sent == given
    decode = lambda s: base64.b64decode(s.replace("-", "+").replace("_", "/") + "==")  # noqa: E731
    return bool(decode(sent) == decode(given))


def _signature(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


class StrictGemini(FakeGemini, Enforcing):
    def __init__(self, script: list[Step]) -> None:
        Enforcing.__init__(self, script)
        self.base_url = self.root
        self.models = ["gemini-3.1-pro-preview"]
        self.issued: dict[str, str] = {}  # function call id → the signature given with it
        self.text_signatures: set[str] = set()

    def check(self, body: dict[str, Any], path: str) -> Step | None:
        for n, content in enumerate(body.get("contents") or []):
            if content.get("role") != "model":
                continue
            for k, part in enumerate(content.get("parts") or []):
                call = part.get("functionCall")
                if (
                    call
                    and call.get("id") in self.issued
                    and not _same(part.get("thoughtSignature"), self.issued[call["id"]])
                ):
                    return _refusal(
                        f"Function call is missing a thought_signature in functionCall parts. This is "
                        f"required for tools to work correctly. Additional data, function call "
                        f"`{call.get('name')}`, position {n}.{k}."
                    )
        return None

    def _calls(self, step: Step) -> list[dict[str, Any]]:
        calls = FakeGemini._calls(step)
        turn = len(self.issued)
        for k, part in enumerate(calls):
            call_id = f"fc_{turn}_{k}"
            part["functionCall"]["id"] = call_id
            if k == 0:  # parallel calls: only the first part carries the signature
                part["thoughtSignature"] = _signature(call_id)
                self.issued[call_id] = part["thoughtSignature"]
            else:
                self.issued[call_id] = None  # type: ignore[assignment]
        return calls

    def whole(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        return self._final(step) if not step.get("tool_calls") else self._response(self._calls(step), "STOP", True)

    def _final(self, step: Step) -> dict[str, Any]:
        sig = _signature(step["content"])
        self.text_signatures.add(sig)
        out = self._response([{"text": step["content"], "thoughtSignature": sig}], "STOP", True)
        out["usageMetadata"]["thoughtsTokenCount"] = 40
        out["modelVersion"] = "gemini-3.1-pro-preview-2026-02"
        return out

    def events(self, body: dict[str, Any], step: Step) -> list[Event]:
        if step.get("tool_calls"):
            done = self._response(self._calls(step), "STOP", True)
            done["usageMetadata"]["thoughtsTokenCount"] = 40
            return [(None, done)]
        texts = pieces(step["content"], int(step.get("chunks", 4)))
        out: list[Event] = [(None, self._response([{"text": t}], None, False)) for t in texts[:-1]]
        last = self._final({"content": texts[-1]})
        return [*out, (None, last)]


class ThinkingAnthropic(FakeAnthropic, Enforcing):
    MAX_IMAGES = 100

    def __init__(self, script: list[Step]) -> None:
        Enforcing.__init__(self, script)
        self.base_url = self.root
        self.models = ["claude-opus-4-7"]
        self.issued: dict[str, dict[str, str]] = {}  # tool_use id → the thinking block before it

    def check(self, body: dict[str, Any], path: str) -> Step | None:
        images = sum(
            1
            for m in body.get("messages") or []
            for b in m.get("content") or []
            if isinstance(b, dict) and b.get("type") == "image"
        )
        if images > self.MAX_IMAGES:
            return _refusal(f"messages: Too many images: {images} > {self.MAX_IMAGES} per request")
        if not body.get("thinking"):
            return None
        if "temperature" in body:
            return _refusal("temperature may only be set to 1 when thinking is enabled")
        for n, m in enumerate(body.get("messages") or []):
            blocks = [b for b in m.get("content") or [] if isinstance(b, dict)]
            uses = [b for b in blocks if b.get("type") == "tool_use" and b.get("id") in self.issued]
            if m.get("role") != "assistant" or not uses:
                continue
            want = self.issued[uses[0]["id"]]
            if not blocks or blocks[0].get("type") not in ("thinking", "redacted_thinking"):
                return _refusal(
                    f"messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{blocks[0].get('type') if blocks else 'nothing'}`. When `thinking` is enabled, an "
                    "assistant message with tool use must start with its thinking block."
                )
            if blocks[0].get("thinking") != want["thinking"] or blocks[0].get("signature") != want["signature"]:
                return _refusal(f"messages.{n}.content.0: Invalid `signature` in `thinking` block")
        return None

    def _message(self, body: dict[str, Any], step: Step) -> dict[str, Any]:  # type: ignore[override]
        done = FakeAnthropic._message(body, step)
        if body.get("thinking"):
            thought = f"Plan for turn {len(self.issued)}: look at the next view."
            block = {"type": "thinking", "thinking": thought, "signature": _signature(thought)}
            for b in done["content"]:
                if b["type"] == "tool_use":
                    b["id"] = f"toolu_{len(self.issued)}_{b['id']}"
                    self.issued[b["id"]] = block
            done["content"] = [block, *done["content"]]
        done["model"] = "claude-opus-4-7-20260401"
        return done


def _chars(body: dict[str, Any]) -> int:
    n = 0
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, str):
            n += len(content)
        elif isinstance(content, list):
            n += sum(len(p.get("text", "")) for p in content if p.get("type") == "text")
    return n


class FakeVLLM(Enforcing):
    """vLLM serving MODEL with an image limit, a context length (tokens: 4 characters each, images at
    `tokens_per_image`) and a tool parser or none."""

    def __init__(
        self,
        script: list[Step],
        model: str = "Qwen/Qwen3.5-9B",
        image_limit: int | None = None,
        max_model_len: int | None = None,
        tool_parser: bool = True,
        tokens_per_image: int = 1300,
    ) -> None:
        super().__init__(script)
        self.models = [model]
        self.image_limit, self.max_model_len, self.tool_parser = image_limit, max_model_len, tool_parser
        self.tokens_per_image = tokens_per_image

    def model_list(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "vllm", "max_model_len": self.max_model_len}
                for m in self.models
            ],
        }

    def check(self, body: dict[str, Any], path: str) -> Step | None:
        if body.get("tools") and not self.tool_parser:
            return _refusal('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
        images = images_in(body)
        if self.image_limit is not None and images > self.image_limit:
            return _refusal(f"At most {self.image_limit} image(s) may be provided in one request.")
        tokens = _chars(body) // 4 + images * self.tokens_per_image + int(body.get("max_tokens") or 0)
        if self.max_model_len is not None and tokens > self.max_model_len:
            return _refusal(
                f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                f"requested {tokens} tokens in the messages. Please reduce the length of the messages."
            )
        return None

    def _step_as_text(self, body: dict[str, Any], step: Step) -> Step:
        """Without native tools, the model writes its calls as text blocks."""
        if body.get("tools") or not step.get("tool_calls"):
            return step
        blocks = [
            f'<tool_call>\n{{"name": "{c["name"]}", "arguments": {c["arguments"]}}}\n</tool_call>'
            for c in step["tool_calls"]
        ]
        return {"content": "\n".join(["Looking at the next view.", *blocks]), "chunks": 1}

    def whole(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        return super().whole(body, self._step_as_text(body, step))

    def events(self, body: dict[str, Any], step: Step) -> list[Event]:
        return super().events(body, self._step_as_text(body, step))


class JsonForStream(FakeOpenAI):
    """A proxy in front of an OpenAI-compatible server that answers every request with one JSON body. The model's
    reply to a streamed request (which the client cannot read) is given again to the next request."""

    def streams(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> bool:
        return False

    def _next(self, body: dict[str, Any]) -> Step:
        if not body.get("stream"):
            return super()._next(body)
        with self._lock:
            self.requests.append(body)
            if callable(self.script):
                return self.script(body)
            return self.script[min(self._n, len(self.script) - 1)]
