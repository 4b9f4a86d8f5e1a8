"""The outcome of one handler call: what the HTTP envelope, the trace and the callers all read."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any


@dataclass
class EncodedImage:
    view: str
    mime: str
    data: bytes
    label: str = ""

    @cached_property
    def sha256(self) -> str:
        """Hash of the bytes, computed once (the trace, the HTTP envelope and replay all read it)."""
        return hashlib.sha256(self.data).hexdigest()

    def to_json(self, with_data: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"view": self.view, "mime": self.mime, "label": self.label, "sha256": self.sha256}
        if with_data:
            out["data_base64"] = base64.b64encode(self.data).decode("ascii")
        return out


@dataclass
class CallOutcome:
    """Result of one call, ready for JSON (HTTP envelope) or the trace."""

    name: str
    ok: bool
    status: int
    result: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    images: list[EncodedImage] = field(default_factory=list)
    error: dict[str, str] | None = None
    seq: int | None = None

    def envelope(self, with_images: bool = True) -> dict[str, Any]:
        if not self.ok:
            return {"ok": False, "error": self.error}
        return {
            "ok": True,
            "result": self.result,
            "state": self.state,
            "images": [im.to_json(with_images) for im in self.images],
        }


def jsonable(value: Any) -> Any:
    """Round-trip through JSON so results hold only plain types (numpy scalars become floats)."""
    return json.loads(json_text(value))


def json_text(value: Any) -> str:
    """JSON text of a value as `jsonable` reads it (parsing it again is a fresh copy, faster than `deepcopy`)."""
    return _ENCODER.encode(value)


def _default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


_ENCODER = json.JSONEncoder(default=_default, allow_nan=False)  # made once (`json.dumps` makes one per call)
