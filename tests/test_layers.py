"""Layering contracts, checked on the import graph read from the source (`python -m tests.import_graph`)."""

from __future__ import annotations

import functools

import pytest

from tests.import_graph import cycles, file_edges, floors, unit, unit_edges


@functools.cache
def _edges() -> dict[str, set[str]]:
    """The file import graph, read once when the first test asks (not at collection)."""
    return file_edges()

# Packages that must never import another, whatever changes around them (lower → upper would be upward).
FORBIDDEN = [
    ("copilot.engine", "copilot.tools"),
    ("copilot.engine", "copilot.cases"),
    ("copilot.engine", "copilot.session"),
    ("copilot.cases", "copilot.bench"),
    ("copilot.cases", "copilot.engine.volume.viewer"),
    ("copilot.viewer", "copilot.engine.volume.viewer"),  # protocols stand over value types, not concrete viewers
    ("copilot.viewer", "copilot.engine.slide.viewer"),
    ("copilot.trace", "copilot.session"),
    ("copilot.trace", "copilot.runtime"),
    ("copilot.tools", "copilot.session"),
    ("copilot.session", "copilot.runtime"),
    ("copilot.bench", "copilot.agent"),
    ("copilot.bench", "copilot.medflow"),
    ("copilot.agent", "copilot.bench"),
    ("copilot.agent", "copilot.medflow"),
    ("copilot.adapters", "copilot.bench"),
    ("qupath_ext", "copilot.session"),
]


def test_no_circles_between_files() -> None:
    assert cycles(_edges()) == []


def test_no_circles_between_packages_so_no_upward_imports() -> None:
    assert cycles(unit_edges(_edges())) == []
    levels = floors(unit_edges(_edges()))
    assert all(levels[b] < levels[a] for a, bs in unit_edges(_edges()).items() for b in bs)


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
