"""Hash-chained JSONL traces of every handler call, and their replay."""

from copilot.trace.recorder import TraceRecorder, canonical_json

__all__ = ["TraceRecorder", "canonical_json"]
