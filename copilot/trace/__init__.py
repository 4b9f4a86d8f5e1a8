"""Hash-chained JSONL traces of every handler call: writing them, reading and verifying their chain."""

from copilot.trace.chain import TraceChainError, read_trace
from copilot.trace.recorder import TraceRecorder, canonical_json

__all__ = ["TraceChainError", "TraceRecorder", "canonical_json", "read_trace"]
