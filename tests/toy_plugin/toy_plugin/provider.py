"""A model provider of the toy package: an in-process wire that answers every request with the option A answer
(no network), declared by an entry point in `medcopilot.providers`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from copilot.llm.providers import Provider
from copilot.llm.types import ChatRequest, Reply, Usage


class EchoWire:
    """Answers at once; lists one model."""

    wire = "toy-echo"

    def __init__(self, spec: Any, timeout_s: float, stream: bool = True, client: Any = None) -> None:
        self.spec = spec

    def complete(self, request: ChatRequest, on_text: Callable[[str], None] | None = None) -> Reply:
        if on_text is not None:
            on_text("ANSWER: A")
        return Reply("ANSWER: A", [], "stop", Usage(10, 2), 1)

    def abort(self) -> None:
        return None

    def list_models(self) -> list[str]:
        return ["echo-1"]


PROVIDER = Provider("toyllm", "toy-echo", "toy_plugin.provider:EchoWire", ("TOYLLM_KEY",), None, None, "echo-1",
                    False, "the toy package's in-process echo model", hosted=False)  # fmt: skip
