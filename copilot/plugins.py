"""Plug-ins by Python entry points: viewer kinds, benchmark modules, dataset adapters, Track B operation sets, host
applications and model providers, the core's own included.

A package adds one by declaring an entry point in one of `GROUPS` (`[project.entry-points."medcopilot.kinds"]`
and so on) whose object is the descriptor or the adapter function. Each group is loaded lazily, once per
process; an entry point that fails to load is reported by name (`problems`) and never stops the core. When the
installed metadata of this project predates its own declarations (a source checkout, an old editable install),
the core's own entry points are read from the `pyproject.toml` beside `copilot/`, the one place they are stated.
"""

from __future__ import annotations

import importlib.metadata as metadata
import logging
import os
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

T = TypeVar("T")

KINDS_GROUP = "medcopilot.kinds"
MODULES_GROUP = "medcopilot.modules"
ADAPTERS_GROUP = "medcopilot.adapters"
OPERATION_SETS_GROUP = "medcopilot.operation_sets"
HOSTS_GROUP = "medcopilot.hosts"
PROVIDERS_GROUP = "medcopilot.providers"
GROUPS = (KINDS_GROUP, MODULES_GROUP, ADAPTERS_GROUP, OPERATION_SETS_GROUP, HOSTS_GROUP, PROVIDERS_GROUP)
CORE_PACKAGE = "copilot"
REPLACES_ENV = "MEDCOPILOT_PLUGIN_REPLACES"  # GROUP:NAME,… core entries the user lets a plug-in replace

_FOUND: dict[str, list[metadata.EntryPoint]] = {}
_LOADED: dict[str, dict[str, Any]] = {}
_PROBLEMS: dict[str, str] = {}  # "group:name" -> why it did not load
_DECLARED: dict[str, set[str]] = {group: set() for group in GROUPS}  # names registered in-process, not by metadata


def _core_declarations(group: str) -> list[metadata.EntryPoint]:
    """The core's own entry points of a group as `pyproject.toml` beside the package states them (none when the
    package is installed without its source tree)."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if not pyproject.is_file():
        return []
    try:
        declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get("entry-points", {})
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return []
    return [metadata.EntryPoint(name, value, group) for name, value in declared.get(group, {}).items()]


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The entry points of a group, the core's first and then the installed plug-ins', each by name (an order that
    does not depend on how the metadata was written; nothing loaded; read once per process)."""
    if group not in GROUPS:
        raise ValueError(f"unknown plug-in group {group!r}; one of {', '.join(GROUPS)}")
    if group not in _FOUND:
        found = list(metadata.entry_points(group=group))
        core = [ep for ep in found if _package(ep) == CORE_PACKAGE]
        if not core:  # installed metadata older than the declarations, or no installation at all
            core = _core_declarations(group)
        others = [ep for ep in found if _package(ep) != CORE_PACKAGE]
        _FOUND[group] = sorted(core, key=lambda ep: ep.name) + sorted(others, key=lambda ep: ep.name)
    return list(_FOUND[group])


def _package(ep: metadata.EntryPoint) -> str:
    """The top-level package an entry point's object lives in."""
    return ep.value.split(":")[0].split(".")[0].strip()


def names(group: str) -> set[str]:
    """The names a group offers without loading anything: declared entry points and names registered here."""
    return {ep.name for ep in entry_points(group)} | _DECLARED[group]


def declare(group: str, name: str) -> None:
    """Note a name registered in-process (a descriptor declared by code, not by an entry point)."""
    _DECLARED[group].add(name)


def replacements() -> set[str]:
    """The core entries a plug-in may replace, by the user's explicit choice: `$MEDCOPILOT_PLUGIN_REPLACES`, a
    comma-separated list of GROUP:NAME (e.g. `medcopilot.kinds:radiology`)."""
    return {item.strip() for item in os.environ.get(REPLACES_ENV, "").split(",") if item.strip()}


def load(group: str) -> dict[str, Any]:
    """Every entry point of a group loaded once: name -> object (the first of a name wins: the core's, then the
    plug-ins' by name). A second entry point of a name taken is refused by name and the first stays as it was,
    unless the name is the core's and `replacements()` names it (then the plug-in's replaces it, logged). One that
    fails to load is kept in `problems` and left out, never raised."""
    if group in _LOADED:
        return dict(_LOADED[group])
    loaded: dict[str, Any] = {}
    _LOADED[group] = loaded  # set first: an entry point whose import asks for its own group sees it as loading
    owner: dict[str, metadata.EntryPoint] = {}  # name -> the entry point that took it
    for ep in entry_points(group):
        first = owner.get(ep.name)
        if first is not None:
            core = _package(first) == CORE_PACKAGE and _package(ep) != CORE_PACKAGE
            if not (core and f"{group}:{ep.name}" in replacements()):
                whose = "the core's" if _package(first) == CORE_PACKAGE else f"{first.value}'s"
                refuse(group, ep.name, ValueError(
                    f"{ep.value} reuses the name of {whose} entry, which stays (a plug-in replaces a core entry "
                    f"only when {REPLACES_ENV} names {group}:{ep.name})"), drop=False)  # fmt: skip
                continue
            logging.getLogger(__name__).warning("plug-in %s:%s (%s) replaces the core's entry (%s)", group, ep.name,
                                                ep.value, REPLACES_ENV)  # fmt: skip
        owner[ep.name] = ep
        try:
            loaded[ep.name] = ep.load()
        except Exception as exc:  # a broken plug-in is reported by name; the core and other plug-ins go on
            refuse(group, ep.name, exc, ep.value)
    return dict(loaded)


def resolve(ref: str) -> Any:
    """The object a "module:attribute" reference names (as an entry point's value), imported now."""
    return metadata.EntryPoint("", ref, "").load()


def descriptors(group: str, cls: type[Any]) -> dict[str, Any]:
    """A group's loaded objects that are `cls` instances carrying their entry point's name; any other is refused
    by name (kept in `problems`) and left out."""
    found: dict[str, Any] = {}
    for name, obj in load(group).items():
        if isinstance(obj, cls) and getattr(obj, "name", None) == name:
            found[name] = obj
        else:
            got = getattr(obj, "name", None) if isinstance(obj, cls) else type(obj).__name__
            refuse(group, name, TypeError(f"expected the {cls.__name__} {name!r}, got {got!r}"))
    return found


def lookup(group: str, known: dict[str, T], name: str, what: str) -> T:
    """`known[name]`, or a ValueError naming the `what` asked for, the known names and any of the group's plug-ins
    that failed to load."""
    if name not in known:
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(known)}{failed_note(group)}")
    return known[name]


def refuse(group: str, name: str, exc: BaseException, where: str = "", drop: bool = True) -> None:
    """Record a plug-in that failed to load or to register (its name and error), and log it once; `drop` leaves
    the loaded object of that name out too (not when another entry of the name keeps it)."""
    key = f"{group}:{name}"
    _PROBLEMS[key] = f"{where + ': ' if where else ''}{type(exc).__name__}: {exc}"
    if drop:
        _LOADED.get(group, {}).pop(name, None)
    logging.getLogger(__name__).warning("plug-in %s not loaded: %s", key, _PROBLEMS[key])


def problems(group: str | None = None) -> dict[str, str]:
    """Plug-ins that failed to load so far ('group:name' -> the error), of one group or of all."""
    return {k: v for k, v in _PROBLEMS.items() if group is None or k.startswith(f"{group}:")}


def failed_note(group: str) -> str:
    """A sentence naming a group's plug-ins that failed to load ('' when none did), for an unknown-name error."""
    failed = problems(group)
    return f"; plug-ins not loaded: {'; '.join(f'{k} ({v})' for k, v in failed.items())}" if failed else ""


class LazyChoices(Sequence[str]):
    """A command-line choice list read from the plug-in registry only when argparse first needs it (a value to
    check, a usage line to print): building the parser loads no plug-in, and one installed later is offered."""

    def __init__(self, read: Callable[[], Iterable[str]]) -> None:
        self._read = read
        self._names: list[str] | None = None

    def _all(self) -> list[str]:
        if self._names is None:
            self._names = list(self._read())
        return self._names

    def __contains__(self, value: object) -> bool:
        return value in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._all()[index]
