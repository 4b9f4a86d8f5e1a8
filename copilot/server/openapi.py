"""The OpenAPI 3.1 document of `/medcopilot/v1`, generated from the handler declarations of a session.

Each handler's argument schema (the same JSON schema agents see) becomes the request body of its
`POST /handlers/NAME` and `POST /jobs/NAME` operations, so schema-driven clients and fuzzers test
exactly what the server validates.
"""

from __future__ import annotations

import copy
from typing import Any

import copilot
from copilot.server.routes import ROUTES

ERROR = {
    "type": "object",
    "required": ["ok", "error"],
    "properties": {
        "ok": {"const": False},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}
ENVELOPE = {
    "type": "object",
    "required": ["ok", "result", "state", "images"],
    "properties": {
        "ok": {"const": True},
        "result": {"type": "object"},
        "state": {"type": "object"},
        "images": {"type": "array", "items": {"type": "object"}},
    },
}
REFUSALS = {
    "400": "invalid JSON or request",
    "401": "missing or wrong bearer token",
    "403": "host, origin or track not allowed",
    "404": "unknown handler",
    "413": "body too large",
    "422": "invalid arguments or refused by the viewer",
}


def _move_defs(schema: dict[str, Any], prefix: str, components: dict[str, Any]) -> dict[str, Any]:
    """Lift `$defs` into `components/schemas` (named per handler) and point the references there."""
    schema = copy.deepcopy(schema)
    defs = schema.pop("$defs", {})

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (
                    f"#/components/schemas/{prefix}.{v.split('/')[-1]}"
                    if k == "$ref" and isinstance(v, str)
                    else fix(v)
                )
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    for name, sub in defs.items():
        components[f"{prefix}.{name}"] = fix(sub)
    return fix(schema)


def _json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": False, "content": {"application/json": {"schema": schema}}}


def _responses(ok: dict[str, Any], ok_status: str = "200") -> dict[str, Any]:
    out: dict[str, Any] = {ok_status: {"description": "done", "content": {"application/json": {"schema": ok}}}}
    for status, why in REFUSALS.items():
        out[status] = {
            "description": why,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    return out


def openapi_document(handlers: list[dict[str, Any]], base: str = "/medcopilot/v1") -> dict[str, Any]:
    """OpenAPI document of the route table (`copilot.server.routes.ROUTES`) for the given handler descriptions
    (`Session.handlers()`): a per-handler route appears once per handler, its arguments as the body."""
    components: dict[str, Any] = {"Error": ERROR, "Envelope": ENVELOPE}
    refs = {}
    for h in handlers:
        components[f"{h['name']}.args"] = _move_defs(h["parameters"], h["name"], components)
        refs[h["name"]] = {"$ref": f"#/components/schemas/{h['name']}.args"}
    paths: dict[str, Any] = {}
    for route in ROUTES:
        ok = {"$ref": "#/components/schemas/Envelope"} if route.operation == "call" else {"type": "object"}
        if not route.per_handler:
            item = paths.setdefault(f"{base}{route.path}", {})
            if "{job_id}" in route.path:
                item["parameters"] = [{"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}]
            item[route.method.lower()] = {
                "operationId": route.operation,
                "summary": route.summary,
                "responses": _responses(ok, str(route.ok_status)),
            }
            continue
        for h in handlers:
            job = route.operation == "start_job"
            paths[f"{base}{route.path.replace('{name}', h['name'])}"] = {
                route.method.lower(): {
                    "operationId": f"{h['name']}_job" if job else h["name"],
                    "summary": f"{h['name']} as a job (poll GET /jobs/JOB_ID)" if job else h["description"],
                    "tags": [h["role"]],
                    "requestBody": _json_body(refs[h["name"]]),
                    "responses": _responses(ok, str(route.ok_status)),
                }
            }
    return {
        "openapi": "3.1.0",
        "info": {"title": "MedCopilot handler API", "version": copilot.__version__},
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
