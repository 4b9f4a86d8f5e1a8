"""Host applications the copilot runs beside or inside (3D Slicer, QuPath, a plug-in's), one descriptor each,
offered by entry points of the `medcopilot.hosts` group (the core's two declared so in pyproject.toml).

A descriptor says which viewer kind the host shows, which handlers a session on the clinician's own study
withholds and which host-only ones it adds, the conversation prompt, and, by "module:attribute" references loaded
only when used, how `medcopilot gui --attach NAME` opens its side panel and how `medcopilot serve --attach NAME`
reaches a running instance. A new host is therefore its own package plus one entry point: no core file names it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot import plugins
from copilot.host.registry import HIDDEN, withhold
from copilot.resources import declare_prompt


@dataclass(frozen=True, kw_only=True)
class HostApp:
    """One host application. `panel`: "module:function" `(address, trace_dir, screenshot) -> exit code` that
    attaches the side panel; `connect`: "module:function" `(address) -> viewer` driving a running instance;
    either '' when the host offers no such entry (Slicer's panel lives in its own scripted module)."""

    name: str
    title: str  # how the clinician knows it ("QuPath")
    kind: str  # the viewer kind of what it shows
    hidden: frozenset[str] | None = None  # handlers withheld on the clinician's study (None: the kind's default)
    handlers: str = ""  # "module:attribute" of a Registry of host-only handlers ('' none)
    prompt: str | Path = ""  # its conversation prompt, text or a file beside it ('': resources/prompts/PROMPT_NAME.txt)
    prompt_name: str = ""  # the name the prompt is filed under ('': host_NAME); a host session's study module
    panel: str = ""
    connect: str = ""
    address: str = ""  # the default address of a running instance (a port, a URL)

    def __post_init__(self) -> None:
        if self.prompt:  # a plug-in's prompt lives in its own package, declared with the descriptor
            declare_prompt(self.module, self.prompt)

    @property
    def module(self) -> str:
        """The name its conversation prompt is filed under (a host session's study module)."""
        return self.prompt_name or f"host_{self.name}"

    def withheld(self) -> frozenset[str]:
        """The handlers a session on the clinician's study does not offer."""
        return self.hidden if self.hidden is not None else HIDDEN.get(self.kind, frozenset())

    def extra_handlers(self) -> tuple[Any, ...]:
        """The host-only handler registries (loaded when first asked for)."""
        return (plugins.resolve(self.handlers),) if self.handlers else ()

    def offer(self, session: Any) -> None:
        """Make a session on the clinician's study offer what this host offers (withheld and added handlers),
        recorded in its trace so that replay offers the same."""
        withhold(session, self.withheld(), self.extra_handlers())


SLICER = HostApp(name="slicer", title="3D Slicer", kind="radiology", prompt_name="host_radiology")
QUPATH = HostApp(
    name="qupath",
    title="QuPath",
    kind="pathology",
    handlers="copilot.host.handlers:QUPATH_HOST",
    prompt_name="host_pathology",
    panel="copilot.gui.host_panel:qupath_main",
    connect="copilot.host.apps:connect_qupath",
    address="25333",
)


def connect_qupath(address: str) -> Any:
    """A live QuPath driven through its Py4J gateway on port `address` (token: $MEDCOPILOT_QUPATH_TOKEN)."""
    from qupath_ext import QuPathViewer

    return QuPathViewer.connect(int(address), os.environ.get("MEDCOPILOT_QUPATH_TOKEN"))


def hosts() -> dict[str, HostApp]:
    """Every host application by name, the core's first (entry points read once; a broken one is named by
    `plugins.problems` and left out)."""
    return plugins.descriptors(plugins.HOSTS_GROUP, HostApp)


def host_app(name: str) -> HostApp:
    """The host of a name, or a ValueError naming the known ones (and any that failed to load)."""
    return plugins.lookup(plugins.HOSTS_GROUP, hosts(), name, "host application")


def _entry(name: str, what: str) -> tuple[HostApp, Any]:
    """A host and the object its `what` reference names; a ValueError when it offers none."""
    app = host_app(name)
    ref = getattr(app, what)
    if not ref:
        raise ValueError(f"the {app.title} host offers no {'side panel' if what == 'panel' else 'connection'} "
                         "from the command line (it runs inside its own application)")  # fmt: skip
    return app, plugins.resolve(ref)


def attach_panel(name: str, address: str | None, trace_dir: str | None, screenshot: str | None) -> int:
    """`medcopilot gui --attach NAME`: the host's side panel on what its running instance shows."""
    app, main = _entry(name, "panel")
    return int(main(address or app.address, trace_dir, screenshot))


def connect_viewer(name: str, address: str | None) -> Any:
    """`medcopilot serve --attach NAME`: a viewer driving the host's running instance at `address`."""
    app, connect = _entry(name, "connect")
    return connect(address or app.address)
