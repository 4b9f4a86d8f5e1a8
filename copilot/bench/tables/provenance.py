"""Where each run configuration's results came from, as a table: code version and commit, case packs, prompt
and tool-schema digests, price table, model profile, the model snapshots the service named and the decoding
and reasoning settings sent (from each row's `process.provenance`; distinct values listed, never pooled away)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from copilot.bench.tables.aggregate import config_label, configurations
from copilot.bench.tables.render import Cell, Table

COLUMNS = ("Episodes", "Code", "Case packs", "Prompt templates", "Tool schemas", "Price table", "Model profile",
           "Model snapshots", "Decoding and reasoning sent")  # fmt: skip


def _code(p: dict[str, Any]) -> str:
    code = p.get("code") or {}
    commit = code.get("commit")
    text = str(code.get("version") or "?")
    if commit:
        text += f" @ {commit[:12]}" + (" (modified)" if code.get("dirty") else "")
    return text


def _profile(p: dict[str, Any]) -> str:
    prof = p.get("profile")
    return f"{prof.get('id')} {prof.get('version')}" if isinstance(prof, dict) else ""


def _request(p: dict[str, Any]) -> str:
    req = p.get("request")
    return json.dumps(req, sort_keys=True, separators=(",", ":")) if req else ""


def _short(values: set[str]) -> str:
    """Distinct digests: one shown by its first 12 hex digits; several counted, with a digest of the set."""
    values = {v for v in values if v}
    if not values:
        return ""
    if len(values) == 1:
        return next(iter(values))[:12]
    joined = hashlib.sha256("\n".join(sorted(values)).encode()).hexdigest()[:12]
    return f"{len(values)} distinct (set {joined})"


def _listed(values: set[str]) -> str:
    return "; ".join(sorted(v for v in values if v))


def provenance_table(rows: list[dict[str, Any]]) -> Table:
    groups = configurations(rows)
    configs = sorted(groups)
    t = Table(
        "provenance",
        "Provenance of each run configuration",
        "From each result's provenance: package version and git commit (modified: tracked files differed from it); "
        "case packs: a SHA-256 over each pack's files (one shown by its first 12 digits; several: their number "
        "and a digest of the set); prompt templates and tool schemas: SHA-256 of the templates the task prompt "
        "was filled from (each filled prompt's own digest is in the row) and of the tool declarations offered; "
        "the price table's version; the model profile's id and version; the model snapshots the service named "
        "in its replies; the decoding and reasoning settings sent. Blank: not "
        "recorded (offline policies send no request; rows written before provenance was kept).",
        [[("Configuration", 1), *((c, 1) for c in COLUMNS)]],
    )
    for cfg in configs:
        provs = [(r.get("process") or {}).get("provenance") or {} for r in groups[cfg]]
        snapshots = {s for p in provs for s in p.get("model_snapshots") or []}
        values = [
            str(len(provs)),
            _listed({_code(p) for p in provs if p.get("code")}),
            _short({str(p.get("case_digest") or "") for p in provs}),
            _short({str(p.get("prompt_template_sha256") or p.get("prompt_sha256") or "") for p in provs}),
            _short({str(p.get("tool_schema_sha256") or "") for p in provs}),
            _listed({str(p.get("price_table") or "") for p in provs}),
            _listed({_profile(p) for p in provs}),
            _listed(snapshots),
            _listed({_request(p) for p in provs}),
        ]
        t.rows.append([Cell(config_label(cfg, configs), "label"), *(Cell(v or None, "label") for v in values)])
    return t
