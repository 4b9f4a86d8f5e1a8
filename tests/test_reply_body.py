"""Reply bodies with images spliced in as bytes are the very bytes `json.dumps` writes, whatever the reply holds."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest

from copilot.server.body import json_body

IMAGE = {"view": "red", "mime": "image/png", "label": "S: 1.0mm", "sha256": "ab" * 32}


def _image(n: int) -> dict[str, Any]:
    return {**IMAGE, "data_base64": base64.b64encode(os.urandom(100 + n * 37)).decode("ascii")}


@pytest.mark.parametrize(
    "reply",
    [
        {"ok": True, "result": {"note": 'é "quoted" \\ ☃', "x": 1.5}, "state": {"views": {"red": [1, 2]}},
         "images": [_image(n) for n in range(3)]},
        {"ok": True, "result": {}, "state": {}, "images": [_image(0)]},
        {"ok": True, "result": {"images": "not the list"}, "state": {}, "images": []},
        {"ok": False, "error": {"code": "invalid_arguments", "message": "size: too large"}},
        {"ok": True, "images": [{**IMAGE, "data_base64": None}]},
        [1, "two", {"images": [_image(1)]}],
    ],
)  # fmt: skip
def test_spliced_body_is_json_dumps(reply: Any) -> None:
    assert json_body(reply) == json.dumps(reply, allow_nan=False).encode("utf-8")


def test_a_result_naming_the_placeholder_form_is_left_alone() -> None:
    reply = {"ok": True, "result": {"text": "@0123456789abcdef:0"}, "state": {}, "images": [_image(2)]}
    assert json.loads(json_body(reply)) == reply


def test_nan_is_refused_as_before() -> None:
    with pytest.raises(ValueError):
        json_body({"ok": True, "result": {"x": float("nan")}, "images": [_image(0)]})
