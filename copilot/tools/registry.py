"""Handler declarations and the registry.

A handler is declared once, as a function whose first parameter is the `HandlerContext` and
whose other parameters are typed (`Annotated[..., Field(description=...)]`). The decorator turns
the signature into a strict pydantic model (unknown keys, NaN/inf and wrong types refused), the
model into the JSON schema that agents see, and the docstring into the description.
Registration fails on a duplicate name, a missing description or an undocumented argument.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar

from PIL import Image
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from copilot.errors import HandlerError
from copilot.tools.writes import WritePlan
from copilot.viewer.protocol import RadiologyViewer, SlideViewer, ViewerBase

Role = Literal["viewer_control", "evidence_capture", "analysis_operator"]
ROLES: tuple[str, ...] = ("viewer_control", "evidence_capture", "analysis_operator")
TRACK_ROLES: dict[str, tuple[str, ...]] = {
    "A": ("viewer_control", "evidence_capture"),
    "B": ("viewer_control", "evidence_capture", "analysis_operator"),
}
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
# MCP tool annotations (the 2025-03-26 revision's names) as each role behaves: views change what is shown, never
# the study; evidence and operators add to the session; a declared write stores outside it, under new identifiers
HINT_KEYS = ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_ROLE_HINTS: dict[str, tuple[bool, bool, bool, bool]] = {  # read-only, destructive, idempotent, open world
    "viewer_control": (True, False, True, False),
    "evidence_capture": (False, False, False, False),
    "analysis_operator": (False, False, False, False),
}
_WRITE_HINTS = (False, True, False, True)
_TITLE_WORDS = {
    "ras": "RAS", "dicom": "DICOM", "seg": "SEG", "sr": "SR", "wsi": "WSI", "qupath": "QuPath", "vista3d": "VISTA3D",
    "wl": "window/level",
}  # fmt: skip
Hints = dict[str, bool | str]


class RegistryError(Exception):
    """A handler declaration is invalid (raised at import time, never at call time)."""


@dataclass
class ImageOut:
    """An image a handler returns: a view render, a keyframe or a cine."""

    view: str
    image: Image.Image | None = None
    data: bytes | None = None  # pre-encoded (e.g. an animated PNG)
    mime: str = "image/png"
    label: str = ""


@dataclass
class HandlerOutput:
    """What an implementation returns: JSON-ready result plus images."""

    result: dict[str, Any] = field(default_factory=dict)
    images: list[ImageOut] = field(default_factory=list)


V = TypeVar("V", bound=ViewerBase)
Progress = Callable[[float, str], None]  # progress(fraction, message) of a call that runs as a job
Cancelled = Callable[[], bool]  # whether the job running the call was cancelled


@dataclass
class HandlerContext(Generic[V]):
    """What an implementation may touch: the viewer, the case root, the evidence log."""

    viewer: V
    case_root: Path | None
    evidence: list[dict[str, Any]]
    case_inputs: dict[str, Any] = field(default_factory=dict)
    output_dir: Path | None = None  # where operators write files (DICOM SEG); the trace's derived/ folder
    progress: Progress | None = None  # set while a job runs the call
    cancelled: Cancelled | None = None
    memo: dict[str, Any] = field(default_factory=dict)  # what the workflow guards remember (planes shown)

    def report(self, fraction: float, message: str = "") -> None:
        """Progress of a long operation (0–1), when the call runs as a job."""
        if self.progress is not None:
            self.progress(fraction, message)

    def is_cancelled(self) -> bool:
        return bool(self.cancelled is not None and self.cancelled())

    def check_cancelled(self) -> None:
        """Stop here (the call is rolled back) when the job was cancelled."""
        if self.is_cancelled():
            raise HandlerError("cancelled", "the operation was cancelled; nothing changed", status=409)


RadiologyContext = HandlerContext[RadiologyViewer]  # what radiology handlers are written against
SlideContext = HandlerContext[SlideViewer]  # what pathology handlers are written against


Impl = Callable[..., HandlerOutput]  # (ctx, **args): the arguments are checked by the spec's model, not by mypy
Planner = Callable[..., WritePlan]  # (ctx, **args): what the call would write and where, writing nothing


@dataclass(frozen=True)
class HandlerSpec:
    """One declared handler."""

    name: str
    kind: str
    role: str
    tracks: tuple[str, ...]
    description: str
    args_model: type[BaseModel]
    impl: Impl
    writes: Planner | None = None  # the second kind of action: what it would write and where (`copilot.tools.writes`)
    hints: tuple[tuple[str, bool | str], ...] = ()  # declared exceptions to the annotations its role and writes give

    @property
    def exports(self) -> bool:
        """Whether it writes a new object outside the viewer (a file, a PACS store) under fresh identifiers."""
        return self.writes is not None

    @property
    def effect(self) -> str:
        """'looks' (views, evidence kept in the session) or 'writes' (outside the session: asks the clinician)."""
        return "writes" if self.writes is not None else "looks"

    def annotations(self) -> Hints:
        """MCP tool annotations: a title from the name, the behaviour hints from the role and `writes`, then the
        handler's own declared exceptions (a relative move is not idempotent; a statistic reads only)."""
        flags = _WRITE_HINTS if self.writes is not None else _ROLE_HINTS[self.role]
        words = [_TITLE_WORDS.get(w, w) for w in self.name.split("_")]
        title = " ".join(words)
        out: Hints = {"title": title[:1].upper() + title[1:], **dict(zip(HINT_KEYS[1:], flags, strict=True))}
        out.update(self.hints)
        return out

    def parameters_schema(self) -> dict[str, Any]:
        """JSON schema of the arguments (titles stripped, as tool schemas usually are)."""
        return _strip_titles(self.args_model.model_json_schema())

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "tracks": list(self.tracks),
            "description": self.description,
            "parameters": self.parameters_schema(),
        }

    def validate(self, args: dict[str, Any] | None) -> dict[str, Any]:
        """Validated keyword arguments, or HandlerError('invalid_arguments') naming each problem."""
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise HandlerError("invalid_arguments", f"{self.name}: arguments must be a JSON object")
        try:
            model = self.args_model.model_validate(args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()
            )
            raise HandlerError("invalid_arguments", f"{self.name}: {problems}") from None
        return {k: getattr(model, k) for k in type(model).model_fields}


def _strip_titles(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema without its `title` strings, at every depth."""
    return {k: _untitled(v) for k, v in schema.items() if k != "title" or not isinstance(v, str)}


def _untitled(value: object) -> object:
    """A value inside a JSON schema with the titles of the objects in it stripped."""
    if isinstance(value, dict):
        return _strip_titles(value)
    if isinstance(value, list):
        return [_untitled(v) for v in value]
    return value


class Handlers(Protocol):
    """What a session asks of its handlers: a `Registry`, or a `RegistryView` of one (views stack)."""

    @property
    def kind(self) -> str: ...
    def get(self, name: str) -> HandlerSpec: ...
    def names(self) -> list[str]: ...
    def specs(self, track: str | None = None) -> list[HandlerSpec]: ...
    def __contains__(self, name: object) -> bool: ...


class Registry:
    """Named handlers of one viewer kind ('radiology' or 'pathology')."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._specs: dict[str, HandlerSpec] = {}

    def handler(
        self,
        *,
        role: Role,
        tracks: Iterable[str] = ("A", "B"),
        name: str | None = None,
        writes: Planner | None = None,
        hints: Hints | None = None,
    ) -> Callable[[Impl], Impl]:
        """Decorator declaring a handler from a typed, documented function. `writes` declares the second kind of
        action: its planner says what the call would write outside the session and where; such a call runs only with
        the clinician's consent (or a headless `--allow-store`), and a replay checks it instead of writing again.
        `hints` overrides MCP annotations that the role and `writes` would get wrong for this handler."""

        def deco(fn: Impl) -> Impl:
            spec = build_spec(fn, kind=self.kind, role=role, tracks=tuple(tracks), name=name)
            self.register(dataclasses.replace(spec, writes=writes, hints=_checked_hints(spec.name, hints or {})))
            return fn

        return deco

    def register(self, spec: HandlerSpec) -> None:
        if spec.name in self._specs:
            raise RegistryError(f"duplicate handler name {spec.name!r} in the {self.kind} registry")
        self._specs[spec.name] = spec

    def get(self, name: str) -> HandlerSpec:
        if name not in self._specs:
            raise HandlerError("unknown_handler", f"no handler named {name!r}")
        return self._specs[name]

    def names(self) -> list[str]:
        return list(self._specs)

    def specs(self, track: str | None = None) -> list[HandlerSpec]:
        """Handlers visible in a track (all when `track` is None)."""
        return [s for s in self._specs.values() if track is None or track in s.tracks]

    def __contains__(self, name: object) -> bool:
        return name in self._specs


def _checked_hints(name: str, hints: Hints) -> tuple[tuple[str, bool | str], ...]:
    """Declared annotation overrides, refused at import when a key is not an MCP annotation or a value its type."""
    for key, value in hints.items():
        if key not in HINT_KEYS or isinstance(value, bool) != (key != "title") or not isinstance(value, bool | str):
            raise RegistryError(f"{name}: hint {key}={value!r} is not an MCP tool annotation ({', '.join(HINT_KEYS)})")
    return tuple(hints.items())


def build_spec(fn: Impl, *, kind: str, role: str, tracks: tuple[str, ...], name: str | None) -> HandlerSpec:
    """Turn a handler function into a spec, checking the declaration rules."""
    hname = name or fn.__name__
    if not _NAME_RE.match(hname):
        raise RegistryError(f"invalid handler name {hname!r}")
    if role not in ROLES:
        raise RegistryError(f"{hname}: unknown role {role!r}")
    if not tracks or any(t not in TRACK_ROLES or role not in TRACK_ROLES[t] for t in tracks):
        raise RegistryError(f"{hname}: role {role} is not allowed in tracks {tracks}")
    doc = inspect.getdoc(fn) or ""
    description = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
    if not description:
        raise RegistryError(f"{hname}: a handler needs a description (its docstring)")
    params = list(inspect.signature(fn, eval_str=True).parameters.values())
    if not params or params[0].name != "ctx":
        raise RegistryError(f"{hname}: the first parameter must be 'ctx'")
    fields: dict[str, Any] = {}
    for p in params[1:]:
        if p.annotation is inspect.Parameter.empty:
            raise RegistryError(f"{hname}: argument {p.name!r} has no type")
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (p.annotation, default)
    config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
    model = create_model(f"{hname}_args", __config__=config, **fields)
    for fname, finfo in model.model_fields.items():
        if not finfo.description:
            raise RegistryError(f"{hname}: argument {fname!r} has no description")
    return HandlerSpec(hname, kind, role, tracks, description, model, fn)


class RegistryView:
    """A registry seen through `_view` (each spec as the view shows it: tracks narrowed, results changed); what a
    view does not say it takes from the registry under it (operation sets, tool protocols, a host's withheld
    handlers are views, and views stack)."""

    def __init__(self, base: Handlers) -> None:
        self.base = base

    @property
    def kind(self) -> str:
        return self.base.kind

    def _view(self, spec: HandlerSpec) -> HandlerSpec:
        return spec

    def get(self, name: str) -> HandlerSpec:
        return self._view(self.base.get(name))

    def specs(self, track: str | None = None) -> list[HandlerSpec]:
        return [s for s in map(self._view, self.base.specs(None)) if track is None or track in s.tracks]

    def names(self) -> list[str]:
        return self.base.names()

    def __getattr__(self, name: str) -> object:
        if name == "base":  # not set yet (a copy being made): no registry under it to ask
            raise AttributeError(name)
        return getattr(self.base, name)

    def __contains__(self, name: object) -> bool:
        return name in self.base
