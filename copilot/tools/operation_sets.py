"""Track B operation sets (Table 3 of the paper enables one advanced operation family per run), each a descriptor
offered by an entry point of the `medcopilot.operation_sets` group (the core's declared so in pyproject.toml), so
a package adds one without an edit here; `operation_sets()` is the one list every command reads."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from copilot import plugins
from copilot.tools.registry import Handlers, HandlerSpec, RegistryView


@dataclass(frozen=True)
class OperationSet:
    """The analysis operators a Track B run may call (None: every one of the track), its title in Table 3 and its
    column place there (`in_table` False: a control run, compared against, never a column)."""

    name: str
    title: str
    operators: frozenset[str] | None
    order: int = 100
    in_table: bool = True


SEGMENTATION = OperationSet("segmentation", "Segmentation", frozenset({"segment_threshold",
                            "segment_grow_from_seeds", "segment_statistics"}), order=10)  # fmt: skip
REGISTRATION = OperationSet("registration", "Registration", frozenset({"register_volumes", "apply_transform",
                            "resample_volume"}), order=20)  # fmt: skip
VISTA3D = OperationSet("vista3d", "3D VISTA (MONAI)", frozenset({"vista3d_segment", "segment_statistics"}), order=30)
ALL = OperationSet("all", "All operations", None, order=40)  # every analysis operator of the track
NONE = OperationSet("none", "Control (no operators)", frozenset(), order=90, in_table=False)  # the unregistered control


def unavailable(name: str) -> str | None:
    """Why a Track B run of an operation set could not score here (its one operator not configured), or None;
    `bench run` refuses such a run before any episode, rather than scoring every call `not_configured`."""
    if name != VISTA3D.name:
        return None
    import importlib.util

    from copilot.engine.ops import vista3d

    root = vista3d.configured_bundle()
    if root is None or not (root / "configs" / "inference.json").is_file():
        return ("--ops vista3d needs a VISTA3D bundle: set MEDCOPILOT_VISTA3D_BUNDLE to a local bundle folder "
                "(configs/inference.json, models/model.pt)")  # fmt: skip
    missing = [m for m in ("torch", "monai") if importlib.util.find_spec(m) is None]
    return f"--ops vista3d needs {' and '.join(missing)} installed" if missing else None


def operation_sets() -> dict[str, OperationSet]:
    """Every operation set by name, in Table 3's column order (entry points read once; a broken one is named by
    `plugins.problems` and left out)."""
    found = plugins.descriptors(plugins.OPERATION_SETS_GROUP, OperationSet)
    return dict(sorted(found.items(), key=lambda kv: (kv[1].order, kv[0])))


def operation_set(name: str) -> OperationSet:
    """The operation set of a name, or a ValueError naming the known ones (and any that failed to load)."""
    return plugins.lookup(plugins.OPERATION_SETS_GROUP, operation_sets(), name, "operation set")


def table_operation_sets() -> tuple[str, ...]:
    """The operation sets Table 3 has columns for, in column order (controls left out)."""
    return tuple(name for name, ops in operation_sets().items() if ops.in_table)


def ops_title(name: str) -> str:
    """An operation set's title in the tables (its name when it is not known)."""
    found = operation_sets().get(name)
    return found.title if found is not None else name


class OpsRegistry(RegistryView):
    """A registry view whose analysis operators outside an operation set are refused as not in the track."""

    def __init__(self, base: Handlers, ops: str) -> None:
        allowed = operation_set(ops).operators
        super().__init__(base)
        self.ops, self.allowed = ops, allowed

    def _view(self, spec: HandlerSpec) -> HandlerSpec:
        if spec.role != "analysis_operator" or self.allowed is None or spec.name in self.allowed:
            return spec
        return dataclasses.replace(spec, tracks=())


def registry_view(registry: Handlers, ops: str | None, protocol: str | None = None) -> Handlers:
    """The registry itself, or a view limited to an operation set and/or a tool protocol (`tools.protocols`)."""
    from copilot.tools.protocols import protocol_view

    return protocol_view(registry if not ops else OpsRegistry(registry, ops), protocol)
