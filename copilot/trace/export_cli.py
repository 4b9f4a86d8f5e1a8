"""`medcopilot trace export-otel TRACE [--endpoint URL | --out FILE] [--content]`: a recorded trace, its chain
verified first, as OpenTelemetry GenAI spans posted to a collector (OTLP/HTTP, JSON) or written as an OTLP/JSON
file. A broken chain is refused (nothing is sent); without `--endpoint` the collector comes from the standard
`OTEL_EXPORTER_OTLP_*` variables."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from copilot.privatefs import write_private
from copilot.trace.chain import read_trace
from copilot.trace.otel import trace_request
from copilot.trace.otlp import OtlpError, content_wanted, post, resource, target_from_env
from copilot.trace.recorder import TRACE_FILE


def _span_count(request: dict[str, Any]) -> int:
    return sum(len(s["spans"]) for r in request["resourceSpans"] for s in r["scopeSpans"])


def _export(ns: argparse.Namespace) -> int:
    folder = Path(ns.trace)
    folder = folder.parent if folder.name == TRACE_FILE else folder  # the folder or its trace.jsonl
    target = None
    if ns.out is None:
        try:
            target = target_from_env(endpoint=ns.endpoint)
        except OtlpError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    events = read_trace(folder)  # a broken chain raises its TraceChainError (a ValueError: exit 2, nothing sent)
    request = trace_request(events, resource(), content=ns.content or content_wanted())
    n = _span_count(request)
    if target is None:
        write_private(ns.out, json.dumps(request, indent=1, sort_keys=True) + "\n")
        print(f"{n} spans of {len(events)} events written to {ns.out}")
        return 0
    try:
        rejected = post(request, target)
    except OtlpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{n - rejected} of {n} spans accepted by {target.where()}" + (f" ({rejected} rejected)" if rejected else ""))
    return 0 if not rejected else 1


def add_trace_parser(sub: Any) -> None:
    """The `trace` command and its `export-otel` sub-command."""
    trace = sub.add_parser("trace", help="recorded traces for other tools")
    tsub = trace.add_subparsers(dest="trace_command", required=True)
    ex = tsub.add_parser("export-otel", help="a trace as OpenTelemetry GenAI spans (OTLP/JSON)")
    ex.add_argument("trace", help="trace folder (or its trace.jsonl)")
    where = ex.add_mutually_exclusive_group()
    where.add_argument("--endpoint", default=None, help="collector URL, OTLP/HTTP (/v1/traces is added; default: "
                       "$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or $OTEL_EXPORTER_OTLP_ENDPOINT)")  # fmt: skip
    where.add_argument("--out", default=None, help="write the OTLP/JSON export request to this file instead")
    ex.add_argument("--content", action="store_true", help="include message content, tool arguments and results "
                    "(off by default; images never)")  # fmt: skip
    ex.set_defaults(func=_export)
