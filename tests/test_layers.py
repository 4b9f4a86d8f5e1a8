"""Layering contracts, checked on the import graph read from the source (`python -m tests.import_graph`)."""

from __future__ import annotations

import functools

import pytest

from tests.import_graph import cycles, file_edges, floors, unit, unit_edges


@functools.cache
def _edges() -> dict[str, set[str]]:
    """The file import graph, read once when the first test asks (not at collection)."""
    return file_edges()

def _contract_pairs() -> list[tuple[str, str]]:
    """(lower, upper) module pairs that must never import each other, read from the one statement of the layer
    rules: the import-linter contracts in pyproject.toml (a layers contract forbids every lower floor importing a
    higher one; a forbidden contract forbids its project-internal modules)."""
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8"))
    pairs: list[tuple[str, str]] = []
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "layers":
            for container in contract["containers"]:
                floors_ = [[f"{container}.{m.strip()}" for m in layer.split(":")] for layer in contract["layers"]]
                pairs += [(low, high) for n, upper in enumerate(floors_) for lower in floors_[n + 1 :]
                          for low in lower for high in upper]  # fmt: skip
        elif contract["type"] == "forbidden":
            internal = [m for m in contract["forbidden_modules"] if m.split(".")[0] in ("copilot", "qupath_ext")]
            pairs += [(src, dst) for src in contract["source_modules"] for dst in internal]
    return pairs


FORBIDDEN = _contract_pairs()


def test_no_circles_between_files() -> None:
    assert cycles(_edges()) == []


def test_no_circles_between_packages_so_no_upward_imports() -> None:
    assert cycles(unit_edges(_edges())) == []
    levels = floors(unit_edges(_edges()))
    assert all(levels[b] < levels[a] for a, bs in unit_edges(_edges()).items() for b in bs)


def test_the_rules_come_from_the_contracts() -> None:
    """The layer rules are stated once (pyproject.toml); this test holds the graph to all of them."""
    assert ("copilot.engine", "copilot.tools") in FORBIDDEN and ("copilot.bench", "copilot.agent") in FORBIDDEN
    assert ("copilot.cases", "copilot.engine.volume.viewer") in FORBIDDEN and len(FORBIDDEN) > 100


@pytest.mark.parametrize(("lower", "upper"), FORBIDDEN)
def test_forbidden_imports(lower: str, upper: str) -> None:
    offenders = [
        f"{a} -> {b}"
        for a, bs in _edges().items()
        for b in bs
        if (a == lower or a.startswith(lower + ".")) and (b == upper or b.startswith(upper + "."))
    ]
    assert offenders == []


def test_only_the_session_reaches_its_viewer_lock_and_trace() -> None:
    """The session keeps them private (ruff's SLF001 is on for the code); nothing names the old public ones."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    offenders = []
    for pkg in ("copilot", "qupath_ext", "slicer_ext", "benchmarks"):
        for path in (root / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr in ("viewer", "lock", "trace", "ctx")
                    and isinstance(node.value, ast.Attribute | ast.Name)
                    and (node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id) == "session"
                ):
                    offenders.append(f"{path.relative_to(root)}:{node.lineno} session.{node.attr}")
    assert offenders == []


def test_every_unit_is_on_a_floor() -> None:
    assert {unit(m) for m in _edges()} <= set(floors(unit_edges(_edges())))


def test_sessions_are_built_in_one_module() -> None:
    """`Session(` is constructed only by `copilot.runtime.new_session` (the one factory), so the recorded kind,
    backend, operation set and track are honoured everywhere a session is made."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sites = []
    for pkg in ("copilot", "qupath_ext", "slicer_ext", "benchmarks"):
        for path in (root / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Session":
                    sites.append(str(path.relative_to(root)))
    assert sites == ["copilot/runtime.py"]


def test_no_public_mutable_lists_on_the_session() -> None:
    """Evidence and listeners are reached through methods (`evidence()`, a copy under the lock; `subscribe`)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    offenders = []
    for pkg in ("copilot", "qupath_ext", "slicer_ext", "benchmarks"):
        for path in (root / pkg).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr in ("evidence", "listeners")
                    and id(node) not in called
                    and isinstance(node.value, ast.Attribute | ast.Name)
                    and (node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id) == "session"
                ):
                    offenders.append(f"{path.relative_to(root)}:{node.lineno} session.{node.attr}")
    assert offenders == []
