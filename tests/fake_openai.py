"""Test doubles of model services on loopback, one per wire format: OpenAI chat completions (`FakeOpenAI`),
Anthropic Messages (`FakeAnthropic`) and Gemini (`FakeGemini`). Each plays the same script of steps (tool calls,
final text) in its own wire format and can inject faults (an HTTP status, 429 with Retry-After, a stall longer than
the client's timeout, a request never answered). Every request is recorded for assertions: parsed, with its path
and headers, and its body bytes exactly as they arrived. A streamed request is answered as server-sent events, the
text in pieces of a few words (`"chunks": N` in a step sets their number), as each provider streams."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = dict[str, Any]
Event = tuple[str | None, dict[str, Any] | str]  # (SSE event name, data: a JSON object or a literal like [DONE])


def tool(name: str, arguments: dict[str, Any] | str | None = None) -> dict[str, Any]:
    return {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {})}


def pieces(text: str, n: int) -> list[str]:
    """`text` cut into at most `n` pieces at spaces (joined again they are the text)."""
    words = text.split(" ")
    n = max(1, min(n, len(words)))
    size = -(-len(words) // n)
    parts = [" ".join(words[i : i + size]) for i in range(0, len(words), size)]
    return [p + (" " if k < len(parts) - 1 else "") for k, p in enumerate(parts)]


class FakeOpenAI:
    """`script` is a list of steps (played in order, the last one repeating) or a function body → step."""

    def __init__(self, script: list[Step] | Callable[[dict[str, Any]], Step]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []  # every request body exactly as it arrived
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.models = ["scripted-model"]  # what the model listing names
        self.release = threading.Event()  # ends every hanging request
        self._n = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:  # the model listing
                fake._send(self, 200, fake.model_list())

            def do_POST(self) -> None:
                fake._answer(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.base_url = self.root + "/v1"

    # ----- what differs per wire format -----
    def model_list(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "test"}
                                           for m in self.models]}  # fmt: skip

    def streams(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def whole(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        return self._completion(body, step)

    def events(self, body: dict[str, Any], step: Step) -> list[Event]:
        events: list[Event] = [(None, c) for c in self._chunks(body, step)]
        return [*events, (None, "[DONE]")]

    # ----- the shared server -----
    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        with self._lock:
            self.bodies.append(raw)
            self.paths.append(handler.path)
            self.headers.append({k.lower(): v for k, v in handler.headers.items()})
        body = json.loads(raw)
        step = self._next(body)
        if step.get("stall_s"):
            time.sleep(step["stall_s"])
        if step.get("hang"):  # never answers (until the test ends)
            self.release.wait(30)
            return
        if step.get("status"):
            extra = {"Retry-After": str(step["retry_after"])} if step.get("retry_after") is not None else {}
            error = {"message": step.get("message", "injected fault"), "type": "server_error",
                     "code": step["status"], "status": "INJECTED"}  # fmt: skip
            self._send(handler, step["status"], {"type": "error", "error": error}, extra)
            return
        if self.streams(handler, body):
            self._send_events(handler, self.events(body, step))
        else:
            self._send(handler, 200, self.whole(body, step))

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, value: Any, extra: dict[str, str] | None = None) -> None:
        payload = json.dumps(value).encode()
        try:
            handler.send_response(status)
            for k, v in (extra or {}).items():
                handler.send_header(k, v)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    @staticmethod
    def _send_events(handler: BaseHTTPRequestHandler, events: list[Event]) -> None:
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream")
            handler.end_headers()
            for name, data in events:
                text = data if isinstance(data, str) else json.dumps(data)
                head = f"event: {name}\n" if name else ""
                handler.wfile.write(f"{head}data: {text}\n\n".encode())
                handler.wfile.flush()
            handler.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _next(self, body: dict[str, Any]) -> Step:
        with self._lock:
            self.requests.append(body)
            if callable(self.script):
                return self.script(body)
            step = self.script[min(self._n, len(self.script) - 1)]
            self._n += 1
            return step

    @staticmethod
    def _completion(body: dict[str, Any], step: Step) -> dict[str, Any]:
        calls = [
            {"id": f"call_{n}", "type": "function", "function": c} for n, c in enumerate(step.get("tool_calls", []))
        ]
        message: dict[str, Any] = {"role": "assistant", "content": step.get("content")}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050},
        }

    @staticmethod
    def _chunks(body: dict[str, Any], step: Step) -> list[dict[str, Any]]:
        """The streamed form of a step: text pieces, then each tool call, the finish reason and the usage."""
        done = FakeOpenAI._completion(body, step)
        message = done["choices"][0]["message"]

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": done["model"],
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip

        out = [chunk({"role": "assistant"})]
        out += [chunk({"content": p}) for p in pieces(message.get("content") or "", int(step.get("chunks", 4)))
                if message.get("content")]  # fmt: skip
        for k, call in enumerate(message.get("tool_calls") or []):
            out.append(chunk({"tool_calls": [{"index": k, "id": call["id"], "type": "function",
                                              "function": call["function"]}]}))  # fmt: skip
        out.append(chunk({}, done["choices"][0]["finish_reason"]))
        if (body.get("stream_options") or {}).get("include_usage"):
            out.append({**chunk({}), "choices": [], "usage": done["usage"]})
        return out

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class FakeAnthropic(FakeOpenAI):
    """The same script in Anthropic's Messages wire format (`POST /v1/messages`; events when streamed)."""

    def __init__(self, script: list[Step] | Callable[[dict[str, Any]], Step]) -> None:
        super().__init__(script)
        self.base_url = self.root  # the SDK adds /v1/messages

    def model_list(self) -> dict[str, Any]:
        return {"data": [{"id": m, "type": "model", "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                         for m in self.models], "has_more": False, "first_id": None, "last_id": None}  # fmt: skip

    @staticmethod
    def _message(body: dict[str, Any], step: Step) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": step["content"]}] if step.get("content") else []
        content += [{"type": "tool_use", "id": f"toolu_{n}", "name": c["name"], "input": json.loads(c["arguments"])}
                    for n, c in enumerate(step.get("tool_calls", []))]  # fmt: skip
        return {"id": "msg_test", "type": "message", "role": "assistant", "model": body.get("model", "m"),
                "content": content, "stop_reason": "tool_use" if step.get("tool_calls") else "end_turn",
                "stop_sequence": None, "usage": {"input_tokens": 1000, "output_tokens": 50}}  # fmt: skip

    def whole(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        return self._message(body, step)

    def events(self, body: dict[str, Any], step: Step) -> list[Event]:
        done = self._message(body, step)
        start = {**done, "content": [], "stop_reason": None, "usage": {"input_tokens": 1000, "output_tokens": 1}}
        out: list[Event] = [("message_start", {"type": "message_start", "message": start})]
        for n, block in enumerate(done["content"]):
            if block["type"] == "thinking":  # extended thinking: the text, then its signature, as deltas
                empty = {"type": "thinking", "thinking": "", "signature": ""}
                out.append(("content_block_start", {"type": "content_block_start", "index": n, "content_block": empty}))
                out += [("content_block_delta", {"type": "content_block_delta", "index": n, "delta": d}) for d in (
                    {"type": "thinking_delta", "thinking": block["thinking"]},
                    {"type": "signature_delta", "signature": block["signature"]})]  # fmt: skip
            elif block["type"] == "text":
                out.append(("content_block_start", {"type": "content_block_start", "index": n,
                                                    "content_block": {"type": "text", "text": ""}}))  # fmt: skip
                out += [("content_block_delta", {"type": "content_block_delta", "index": n,
                                                 "delta": {"type": "text_delta", "text": p}})
                        for p in pieces(block["text"], int(step.get("chunks", 4)))]  # fmt: skip
            else:
                head = {**block, "input": {}}
                out.append(("content_block_start", {"type": "content_block_start", "index": n, "content_block": head}))
                text = json.dumps(block["input"])
                deltas = [{"type": "input_json_delta", "partial_json": text[i : i + 7]} for i in range(0, len(text), 7)]
                out += [("content_block_delta", {"type": "content_block_delta", "index": n, "delta": d})
                        for d in deltas]  # fmt: skip
            out.append(("content_block_stop", {"type": "content_block_stop", "index": n}))
        stop = {"stop_reason": done["stop_reason"], "stop_sequence": None}
        out.append(("message_delta", {"type": "message_delta", "usage": {"output_tokens": 50}, "delta": stop}))
        out.append(("message_stop", {"type": "message_stop"}))
        return out


class FakeGemini(FakeOpenAI):
    """The same script in Gemini's wire format (`POST /v1beta/models/M:generateContent`, or
    `:streamGenerateContent?alt=sse` answered as events)."""

    def __init__(self, script: list[Step] | Callable[[dict[str, Any]], Step]) -> None:
        super().__init__(script)
        self.base_url = self.root  # the SDK adds /v1beta/models/…

    def model_list(self) -> dict[str, Any]:
        return {"models": [{"name": f"models/{m}", "displayName": m} for m in self.models]}

    def streams(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> bool:
        return ":streamGenerateContent" in handler.path

    @staticmethod
    def _response(parts: list[dict[str, Any]], finish: str | None, usage: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]}
        if finish:
            out["candidates"][0]["finishReason"] = finish
        if usage:
            out["usageMetadata"] = {"promptTokenCount": 1000, "candidatesTokenCount": 50, "totalTokenCount": 1050}
        return out

    @staticmethod
    def _calls(step: Step) -> list[dict[str, Any]]:
        return [{"functionCall": {"id": f"fc_{n}", "name": c["name"], "args": json.loads(c["arguments"])}}
                for n, c in enumerate(step.get("tool_calls", []))]  # fmt: skip

    def whole(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        text = [{"text": step["content"]}] if step.get("content") else []
        return self._response(text + self._calls(step), "STOP", True)

    def events(self, body: dict[str, Any], step: Step) -> list[Event]:
        texts = pieces(step["content"], int(step.get("chunks", 4))) if step.get("content") else []
        out: list[Event] = [(None, self._response([{"text": t}], None, False)) for t in texts]
        out.append((None, self._response(self._calls(step) or [{"text": ""}], "STOP", True)))
        return out


def images_in(request: dict[str, Any]) -> int:
    """Number of image parts in a request's messages."""
    n = 0
    for m in request["messages"]:
        if isinstance(m.get("content"), list):
            n += sum(1 for part in m["content"] if part.get("type") == "image_url")
    return n
