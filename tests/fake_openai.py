"""A test double of an OpenAI-compatible chat-completions service on loopback: it plays a script of
responses (tool calls, final text) and can inject faults (HTTP 500, 429 with Retry-After, a stall
longer than the client's timeout). It records every request for assertions: parsed, and the exact body bytes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = dict[str, Any]


def tool(name: str, arguments: dict[str, Any] | str | None = None) -> dict[str, Any]:
    return {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {})}


class FakeOpenAI:
    """`script` is a list of steps (played in order, the last one repeating) or a function body → step."""

    def __init__(self, script: list[Step] | Callable[[dict[str, Any]], Step]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []  # every request body exactly as it arrived
        self._n = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with fake._lock:
                    fake.bodies.append(raw)
                body = json.loads(raw)
                step = fake._next(body)
                if step.get("stall_s"):
                    time.sleep(step["stall_s"])
                if step.get("status"):
                    payload = json.dumps({"error": {"message": "injected fault", "type": "server_error"}}).encode()
                    self.send_response(step["status"])
                    if step.get("retry_after") is not None:
                        self.send_header("Retry-After", str(step["retry_after"]))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                payload = json.dumps(fake._completion(body, step)).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

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

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def images_in(request: dict[str, Any]) -> int:
    """Number of image parts in a request's messages."""
    n = 0
    for m in request["messages"]:
        if isinstance(m.get("content"), list):
            n += sum(1 for part in m["content"] if part.get("type") == "image_url")
    return n
