"""Schema-driven fuzzing of the handler API over real HTTP (hypothesis strategies from the handler schemas).

Arguments are drawn from each handler's JSON schema (the one `/handlers` and the OpenAPI document
publish), then often spoiled: one field replaced by a hostile value (huge or tiny numbers, U+2028,
traversal paths, NUL, long strings, wrong types), an unknown key, a missing required key, a non-object,
or a raw body that is not acceptable JSON. Every reply is checked: no 5xx, no dropped connection, every
refusal carries a code and a message, and a refusal leaves the state (viewer + evidence) unchanged.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from copilot.server.client import RemoteViewer

HOSTILE_STRINGS = [
    "",
    " ",
    "../../hidden/truth.json",
    "hidden/truth.json",
    "/etc/passwd",
    "images/../../..",
    "a\u2028b\u2029c",
    "nul\x00byte",
    "é" * 300,
    "x" * 5000,
    "<script>alert(1)</script>",
    "T1",
    "red",
    "'; DROP TABLE results; --",
]
HOSTILE_NUMBERS = [0, -0.0, -1, 1e-300, 1e300, -1e300, 1.7976931348623157e308, 10**30, -(10**30), 2**63, 0.5, 999, 1000]
RAW_BODIES = [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a": ' + b"9" * 5000 + b"}",
    b'{"a": 1e999}',
    b'{"a": NaN}',
    b'{"a": Infinity}',
    b"\xff\xfe\x00",
    b'{"a": "\xed\xa0\x80"}',
    b"{not json",
    b'{"a": 1,}',
    b"null",
    b"[]",
    b'"text"',
    b"1e400",
]


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].split("/")[-1]]
    return schema


def from_schema(schema: dict[str, Any], defs: dict[str, Any], hints: list[str]) -> st.SearchStrategy[Any]:
    """Values valid for the subset of JSON schema that pydantic emits for handler arguments."""
    schema = _resolve(schema, defs)
    if "anyOf" in schema:
        return st.one_of(*(from_schema(s, defs, hints) for s in schema["anyOf"]))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -(2**31) - 1) + 1)
        hi = schema.get("maximum", schema.get("exclusiveMaximum", 2**31 + 1) - 1)
        return st.integers(int(lo), int(hi))
    if kind == "number":
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum", schema.get("exclusiveMaximum"))
        return st.floats(
            lo,
            hi,
            allow_nan=False,
            allow_infinity=False,
            exclude_min="exclusiveMinimum" in schema,
            exclude_max="exclusiveMaximum" in schema,
        )
    if kind == "string":
        lo, hi = schema.get("minLength", 0), min(schema.get("maxLength", 64), 64)
        if "pattern" in schema:
            return st.one_of(st.from_regex(schema["pattern"], fullmatch=True).filter(lambda s: lo <= len(s) <= hi))
        named = [h for h in hints if lo <= len(h) <= hi]
        return st.one_of(st.text(min_size=lo, max_size=hi), *([st.sampled_from(named)] if named else []))
    if kind == "array":
        items = from_schema(schema.get("items", {}), defs, hints)
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=min(schema.get("maxItems", 6), 6))
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: from_schema(v, defs, hints) for k, v in props.items() if k in required},
            optional={k: from_schema(v, defs, hints) for k, v in props.items() if k not in required},
        )
    return st.none()


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
HOSTILE = st.one_of(st.sampled_from(HOSTILE_STRINGS), st.sampled_from(HOSTILE_NUMBERS), JSONISH)


@st.composite
def handler_call(draw: st.DrawFn, handlers: list[dict[str, Any]], hints: list[str]) -> tuple[str, Any]:
    """(handler name, request body): valid arguments, or arguments spoiled in one of several ways."""
    h = draw(st.sampled_from(handlers))
    schema = h["parameters"]
    args = draw(from_schema(schema, schema.get("$defs", {}), hints))
    mode = draw(st.sampled_from(["valid", "valid", "field", "field", "extra", "missing", "type", "raw"]))
    props = list(schema.get("properties", {}))
    if mode == "field" and props:
        args[draw(st.sampled_from(props))] = draw(HOSTILE)
    elif mode == "extra":
        args[draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in props))] = draw(HOSTILE)
    elif mode == "missing" and schema.get("required"):
        args.pop(draw(st.sampled_from(schema["required"])), None)
    elif mode == "type":
        args = draw(st.one_of(st.lists(JSONISH, max_size=3), st.text(max_size=10), st.integers(), st.none()))
    elif mode == "raw":
        return h["name"], draw(st.sampled_from(RAW_BODIES))
    if isinstance(args, dict) and isinstance(args.get("seconds"), int | float) and h["name"] == "wait":
        args["seconds"] = min(args["seconds"], 0.02)  # a valid wait sleeps up to 5 s: keep the run short
    return h["name"], args


@dataclass
class FuzzStats:
    """What the fuzz run saw; every count except `calls`, `accepted` and `refused` must stay 0."""

    calls: int = 0
    accepted: int = 0
    refused: int = 0
    server_errors: int = 0
    dropped: int = 0
    changed_on_refusal: int = 0
    unlabelled_refusals: int = 0
    probe_failures: int = 0  # hand-made probes (traversal, HTTP) that got a wrong answer
    examples: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(text[:400])

    @property
    def clean(self) -> bool:
        failures = (self.server_errors, self.dropped, self.changed_on_refusal, self.unlabelled_refusals)
        return not (any(failures) or self.probe_failures)


class Fuzzer:
    """Sends calls over one kept-alive connection and checks every reply against the contract."""

    def __init__(self, client: RemoteViewer) -> None:
        self.client = client
        self.stats = FuzzStats()
        self.state = self._state()

    def _state(self) -> str:
        return json.dumps(self.client.state(), sort_keys=True)

    def send(self, name: str, body: Any) -> None:
        s = self.stats
        s.calls += 1
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            reply = self.client.request("POST", f"/medcopilot/v1/handlers/{name}", data)
        except (http.client.HTTPException, OSError) as exc:
            s.dropped += 1
            s.problem(f"dropped: {name} {data[:200]!r}: {exc!r}")
            self.client.close()
            return
        if reply.status >= 500:
            s.server_errors += 1
            s.problem(f"{reply.status}: {name} {data[:200]!r}: {str(reply.body)[:200]}")
        if reply.status == 200 and isinstance(reply.body, dict) and reply.body.get("ok"):
            s.accepted += 1
            self.state = json.dumps(reply.body["state"], sort_keys=True)
            return
        s.refused += 1
        err = reply.body.get("error") if isinstance(reply.body, dict) else None
        if not (isinstance(err, dict) and err.get("code") and err.get("message")):
            s.unlabelled_refusals += 1
            s.problem(f"refusal without code/message: {name}: {str(reply.body)[:200]}")
        now = self._state()
        if now != self.state:
            s.changed_on_refusal += 1
            s.problem(f"state changed by a refused call: {name} {data[:200]!r}")
            self.state = now


def hints_for(client: RemoteViewer) -> list[str]:
    """Names worth drawing as strings: volume ids and names, views, segment names."""
    state = client.state()
    names: list[str] = ["red", "yellow", "green", "all", "T1", "T2", "FLAIR"]
    for vol in state.get("inventory", state.get("volumes", [])) or []:
        if isinstance(vol, dict):
            names += [str(vol.get("id", "")), str(vol.get("name", ""))]
    return [n for n in dict.fromkeys(names) if n]
