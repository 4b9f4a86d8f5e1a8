"""Adapters that read the public datasets in their published layouts into MedFlow case packs.

Each adapter is a function `(src, out, table=None, copy=False) -> AdapterReport` offered by an entry point of the
`medcopilot.adapters` group (the core's five are declared the same way in pyproject.toml); `adapters()` lists them
for `medcopilot cases adapt --dataset`, each loaded when first asked for.
"""

from __future__ import annotations

from collections.abc import Callable

from copilot import plugins
from copilot.adapters.common import AdapterReport

Adapter = Callable[..., AdapterReport]


def adapters() -> dict[str, Adapter]:
    """Every dataset adapter by name (lower case), the core's first; one that is not callable is reported by
    `plugins.problems` and left out."""
    found: dict[str, Adapter] = {}
    for name, fn in plugins.load(plugins.ADAPTERS_GROUP).items():
        if callable(fn):
            found[name.lower()] = fn
        else:
            plugins.refuse(plugins.ADAPTERS_GROUP, name, TypeError(f"{type(fn).__name__} is not an adapter function"))
    return found


def dataset_names() -> list[str]:
    """The `--dataset` choices, the core's first: the entry points' names, read without importing any plug-in."""
    return list(dict.fromkeys(ep.name.lower() for ep in plugins.entry_points(plugins.ADAPTERS_GROUP)))


def adapter(name: str) -> Adapter:
    """The adapter of a dataset name (any case), or a ValueError naming the known ones and any that failed."""
    return plugins.lookup(plugins.ADAPTERS_GROUP, adapters(), name.lower(), "dataset")

