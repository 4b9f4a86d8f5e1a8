"""A trace read as OpenTelemetry GenAI spans, encoded as OTLP/JSON (an `ExportTraceServiceRequest`).

One trace per episode or session: an `invoke_agent medcopilot` span from `episode_start` to `episode_end`, a
`chat {model}` span per model turn (tokens, latency, cost, the service's address) and an `execute_tool {name}` span
per handler call (tool-call id, actor, result code), with approvals, write attempts, refusals and the answer as
events of the episode's span. Every span and event carries its trace event's sequence number, hash and `prev`
link, so a collector's view points back at the hash-chained record, which stays the evidence. Message content,
tool arguments and results are left out unless `content` is asked for (the GenAI conventions' default); images
never leave. Identifiers are derived from the events' hashes: exporting a trace twice gives the same spans.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

SCOPE = "copilot.trace.otel"
AGENT_NAME = "medcopilot"
KIND_INTERNAL, KIND_CLIENT = 1, 3  # OTLP SpanKind
STATUS_ERROR = 2  # OTLP StatusCode
# the GenAI conventions' provider names, for traces recorded before `agent_start` carried the provider's own
# (`provider_telemetry_name`, declared with each provider in copilot/llm/providers.py)
RECORDED_BEFORE = {"azure": "azure.ai.openai", "gemini": "gcp.gemini"}
REQUEST_ATTRS = {"temperature": "gen_ai.request.temperature", "max_tokens": "gen_ai.request.max_tokens",
                 "top_p": "gen_ai.request.top_p", "seed": "gen_ai.request.seed"}  # fmt: skip
HEADER_ATTRS = {"module": "medcopilot.module", "kind": "medcopilot.kind", "track": "medcopilot.track",
                "backend": "medcopilot.backend", "protocol": "medcopilot.protocol", "ops": "medcopilot.ops",
                "medcopilot_version": "medcopilot.version"}  # fmt: skip
# the fields of episode events that are facts rather than content (clinicians' reasons and texts are content)
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "write_attempt": ("handler", "decision", "by", "actor"),
    "clinician_approval": ("handler",),
    "clinician_rejection": ("handler",),
    "clinician_stop": ("handler", "during"),
    "call_refused": ("handler", "code", "used"),
    "model_error": ("kind", "tool"),
    "model_retry": ("round", "attempt", "wait_s", "kind", "status"),
    "model_cancelled": ("round", "after_s"),
    "agent_error": ("kind", "rounds"),
    "final_answer": ("status", "rounds"),
    "score": ("task", "strict", "loc"),
}
CONTENT_FIELDS: dict[str, tuple[str, ...]] = {
    "write_attempt": ("what", "destinations"),
    "clinician_rejection": ("reason",),
    "agent_error": ("error",),
    "final_answer": ("content",),
}

Attrs = dict[str, Any]


@dataclass
class Span:
    """One finished span (times in seconds since the epoch)."""

    name: str
    span_id: str
    parent_id: str | None
    start: float
    end: float
    kind: int = KIND_INTERNAL
    attributes: Attrs = field(default_factory=dict)
    events: list[tuple[str, float, Attrs]] = field(default_factory=list)
    error: str | None = None  # the status message of a span that failed

    def to_otlp(self, trace_id: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "traceId": trace_id, "spanId": self.span_id, "name": self.name, "kind": self.kind,
            "startTimeUnixNano": _nanos(self.start), "endTimeUnixNano": _nanos(max(self.start, self.end)),
            "attributes": attributes(self.attributes),
            "events": [{"timeUnixNano": _nanos(t), "name": n, "attributes": attributes(a)} for n, t, a in self.events],
        }  # fmt: skip
        if self.parent_id:
            out["parentSpanId"] = self.parent_id
        if self.error is not None:
            out["status"] = {"code": STATUS_ERROR, "message": self.error}
        return out


def _nanos(seconds: float) -> str:
    return str(round(seconds * 1e9))


def value(v: Any) -> dict[str, Any]:
    """An OTLP `AnyValue` (integers as decimal strings, as the JSON encoding has them)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [value(x) for x in v]}}
    return {"stringValue": json.dumps(v, sort_keys=True, default=str)}


def attributes(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """OTLP `KeyValue`s of the attributes that have a value."""
    return [{"key": k, "value": value(v)} for k, v in attrs.items() if v is not None]


def link(event: Mapping[str, Any]) -> Attrs:
    """Where an event sits in the hash chain."""
    return {"medcopilot.trace.seq": event.get("seq"), "medcopilot.trace.hash": event.get("hash"),
            "medcopilot.trace.prev": event.get("prev")}  # fmt: skip


def _ended(event: Mapping[str, Any], took_ms: Any) -> tuple[float, float]:
    """A span's start and end from the event recorded at its end and how long it took."""
    end = float(event.get("time", 0.0))
    took = float(took_ms) / 1000.0 if isinstance(took_ms, int | float) and not isinstance(took_ms, bool) else 0.0
    return end - max(took, 0.0), end


class SpanBuilder:
    """Turns a trace's events, in order, into spans: `feed` returns the spans an event finished (the episode's
    span at `episode_end`), `finish` the episode's span of a trace that has not ended."""

    def __init__(self, content: bool = False) -> None:
        self.content = content
        self.trace_id: str | None = None
        self.root: Span | None = None
        self.model: Attrs = {}  # the model service's attributes, for every chat span
        self.model_name = ""
        self._call_ids: list[tuple[str, str]] = []  # (tool, id) of the last model turn's calls not yet executed

    def feed(self, event: Mapping[str, Any]) -> list[Span]:
        kind = str(event.get("type", ""))
        if kind == "episode_start":
            self._start(event)
            return []
        root = self.root
        if root is None:
            return []
        root.end = max(root.end, float(event.get("time", root.end)))  # the episode lasts to its last event
        if kind == "agent_start":
            self._agent(event, root)
        elif kind == "model_turn":
            return [self._chat(event, root)]
        elif kind == "handler_call":
            return [self._tool(event, root)]
        elif kind == "episode_end":
            root.end = float(event.get("time", root.end))
            root.attributes["medcopilot.status"] = event.get("status")
            root.attributes["medcopilot.trace.head"] = event.get("hash")
            root.events.append(("episode_end", root.end, link(event)))
            if event.get("status") == "error" and root.error is None:
                root.error = "error"
            self.root = None
            return [root]
        else:
            self._event(kind, event, root)
        return []

    def finish(self) -> list[Span]:
        """The episode's span of a trace without its end (cut short): ended at its last event, marked."""
        if self.root is None:
            return []
        root, self.root = self.root, None
        root.attributes["medcopilot.trace.incomplete"] = True
        return [root]

    # ----- the events -----
    def _start(self, event: Mapping[str, Any]) -> None:
        digest = str(event.get("hash") or "0" * 64)
        self.trace_id = digest[:32]
        t = float(event.get("time", 0.0))
        attrs: Attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT_NAME, **link(event)}
        for key, name in HEADER_ATTRS.items():
            attrs[name] = event.get(key) or None
        if event.get("module") or event.get("study_ref"):  # a benchmark case's id, or a study's reference
            attrs["medcopilot.case.id"] = event.get("case_id")
        self.root = Span(f"invoke_agent {AGENT_NAME}", digest[32:48], None, t, t, KIND_INTERNAL, attrs)

    def _agent(self, event: Mapping[str, Any], root: Span) -> None:
        provider = str(event.get("provider") or "")
        self.model_name = str(event.get("model") or "")
        named = event.get("provider_telemetry_name") or RECORDED_BEFORE.get(provider, provider)
        self.model = {"gen_ai.provider.name": named or None,
                      "gen_ai.request.model": self.model_name or None}  # fmt: skip
        url = event.get("base_url")
        if isinstance(url, str) and url:
            parts = urlsplit(url)
            self.model["server.address"] = parts.hostname
            self.model["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
        request = event.get("request")
        if isinstance(request, Mapping):
            for key, v in request.items():
                if isinstance(v, str | int | float | bool):
                    self.model[REQUEST_ATTRS.get(key, f"medcopilot.request.{key}")] = v
        profile = event.get("profile")
        if isinstance(profile, Mapping):
            self.model["medcopilot.model_profile.id"] = profile.get("id")
            self.model["medcopilot.model_profile.version"] = profile.get("version")
        root.attributes.update(self.model)
        root.attributes["medcopilot.budget"] = event.get("budget")
        root.events.append(("agent_start", float(event.get("time", root.start)), link(event)))

    def _chat(self, event: Mapping[str, Any], root: Span) -> Span:
        start, end = _ended(event, event.get("latency_ms"))
        usage = event.get("usage") if isinstance(event.get("usage"), Mapping) else {}
        assert isinstance(usage, Mapping)
        calls = [c for c in event.get("tool_calls") or [] if isinstance(c, Mapping)]
        self._call_ids = [(str(c.get("name")), str(c.get("id"))) for c in calls if c.get("id")]
        reason = event.get("finish_reason")
        attrs: Attrs = {
            "gen_ai.operation.name": "chat", **self.model,
            "gen_ai.usage.input_tokens": usage.get("input_tokens", usage.get("prompt_tokens")),
            "gen_ai.usage.output_tokens": usage.get("output_tokens", usage.get("completion_tokens")),
            "gen_ai.usage.cache_read.input_tokens": usage.get("cached_tokens") or None,
            "medcopilot.usage.reasoning_tokens": usage.get("reasoning_tokens") or None,
            "gen_ai.response.finish_reasons": [str(reason)] if reason else None,
            "medcopilot.cost_usd": event.get("cost_usd"), "medcopilot.latency_ms": event.get("latency_ms"),
            "medcopilot.round": event.get("round"), "medcopilot.tool_calls": len(calls), **link(event),
        }  # fmt: skip
        if self.content:
            text = event.get("content")
            parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
            parts += [{"type": "tool_call", "id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments")}
                      for c in calls]  # fmt: skip
            message = {"role": "assistant", "parts": parts, "finish_reason": reason}
            attrs["gen_ai.output.messages"] = json.dumps([message], sort_keys=True)
        name = f"chat {self.model_name}" if self.model_name else "chat"
        return Span(name, _span_id(event), root.span_id, start, end, KIND_CLIENT, attrs)

    def _tool(self, event: Mapping[str, Any], root: Span) -> Span:
        start, end = _ended(event, event.get("duration_ms"))
        name, actor = str(event.get("handler", "")), str(event.get("actor", ""))
        call_id = event.get("tool_call_id") or (self._take_id(name) if actor == "agent" else None)
        error = event.get("error") if isinstance(event.get("error"), Mapping) else None
        code = str(error.get("code")) if error else None
        attrs: Attrs = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": call_id, "medcopilot.actor": actor, "medcopilot.result.code": event.get("status"),
            "medcopilot.ok": bool(event.get("ok")), "error.type": code,
            "medcopilot.images": len(event.get("images") or []), **link(event),
        }  # fmt: skip
        if self.content:
            attrs["gen_ai.tool.call.arguments"] = json.dumps(event.get("args", {}), sort_keys=True)
            attrs["gen_ai.tool.call.result"] = json.dumps(event.get("result") if event.get("ok") else error,
                                                          sort_keys=True)  # fmt: skip
        span = Span(f"execute_tool {name}", _span_id(event), root.span_id, start, end, KIND_INTERNAL, attrs)
        if not event.get("ok"):
            span.error = (f"{code}: {error.get('message', '')}" if self.content and error else code) or "failed"
        return span

    def _take_id(self, name: str) -> str | None:
        for n, (tool, call_id) in enumerate(self._call_ids):
            if tool == name:
                del self._call_ids[n]
                return call_id
        return None

    def _event(self, kind: str, event: Mapping[str, Any], root: Span) -> None:
        attrs: Attrs = {f"medcopilot.{k}": _plain(event.get(k)) for k in EVENT_FIELDS.get(kind, ())}
        if kind in ("clinician_approval", "clinician_rejection") and isinstance(event.get("write"), Mapping):
            attrs["medcopilot.write"] = True
        if self.content:
            attrs.update({f"medcopilot.{k}": _plain(event.get(k)) for k in CONTENT_FIELDS.get(kind, ())})
        if kind == "model_error" and event.get("tool"):
            self._take_id(str(event["tool"]))  # a call the model sent that never reached a handler
        if kind == "agent_error":
            root.error = str(event.get("kind") or "error")
            root.attributes["error.type"] = root.error
        if kind == "final_answer":
            root.attributes["medcopilot.rounds"] = event.get("rounds")
        root.events.append((kind, float(event.get("time", root.start)), {**attrs, **link(event)}))


def _plain(v: Any) -> Any:
    """A value an attribute can hold: scalars and lists of strings as they are, anything else as JSON."""
    if v is None or isinstance(v, str | int | float | bool):
        return v
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return v
    return json.dumps(v, sort_keys=True, default=str)


def _span_id(event: Mapping[str, Any]) -> str:
    return str(event.get("hash") or "0" * 16)[:16]


def export_request(
    spans: Iterable[Span], trace_id: str, resource: Mapping[str, Any], version: str = ""
) -> dict[str, Any]:
    """An OTLP/JSON `ExportTraceServiceRequest` of spans of one trace."""
    scope = {"name": SCOPE, **({"version": version} if version else {})}
    scoped = {"scope": scope, "spans": [s.to_otlp(trace_id) for s in spans]}
    return {"resourceSpans": [{"resource": {"attributes": attributes(resource)}, "scopeSpans": [scoped]}]}


def trace_request(
    events: Iterable[Mapping[str, Any]], resource: Mapping[str, Any], content: bool = False
) -> dict[str, Any]:
    """Every span of a trace's events as one export request (the episode's span last)."""
    builder, spans = SpanBuilder(content), []
    version = ""
    for event in events:
        if event.get("type") == "episode_start":
            version = str(event.get("medcopilot_version") or "")
        spans += builder.feed(event)
    spans += builder.finish()
    return export_request(spans, builder.trace_id or "0" * 32, resource, version)
