"""The OpenAPI 3.1 document of `/medcopilot/v1`, generated from the handler declarations of a session.

Each handler's argument schema (the same JSON schema agents see) becomes the request body of its
`POST /handlers/NAME` and `POST /jobs/NAME` operations, so schema-driven clients and fuzzers test
exactly what the server validates.
"""

from __future__ import annotations

import copy
from typing import Any

import copilot

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
    """OpenAPI document for the given handler descriptions (`Session.handlers()`)."""
    components: dict[str, Any] = {"Error": ERROR, "Envelope": ENVELOPE}
    paths: dict[str, Any] = {
        f"{base}/handlers": {"get": {"operationId": "list_handlers", "responses": _responses({"type": "object"})}},
        f"{base}/state": {"get": {"operationId": "get_state", "responses": _responses({"type": "object"})}},
        f"{base}/trace": {"get": {"operationId": "get_trace", "responses": _responses({"type": "object"})}},
        f"{base}/jobs/{{job_id}}": {
            "parameters": [{"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {"operationId": "get_job", "responses": _responses({"type": "object"})},
            "delete": {"operationId": "cancel_job", "responses": _responses({"type": "object"}, "202")},
        },
    }
    for h in handlers:
        schema = _move_defs(h["parameters"], h["name"], components)
        components[f"{h['name']}.args"] = schema
        ref = {"$ref": f"#/components/schemas/{h['name']}.args"}
        paths[f"{base}/handlers/{h['name']}"] = {
            "post": {
                "operationId": h["name"],
                "summary": h["description"],
                "tags": [h["role"]],
                "requestBody": _json_body(ref),
                "responses": _responses({"$ref": "#/components/schemas/Envelope"}),
            }
        }
        paths[f"{base}/jobs/{h['name']}"] = {
            "post": {
                "operationId": f"{h['name']}_job",
                "summary": f"{h['name']} as a job (poll GET /jobs/JOB_ID)",
                "tags": [h["role"]],
                "requestBody": _json_body(ref),
                "responses": _responses({"type": "object"}, "202"),
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
