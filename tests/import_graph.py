"""The project's import graph, read from the source: files, the packages they form, circles and floors.

`python -m tests.import_graph` prints it; `tests/test_layers.py` holds the code to its contracts.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("copilot", "qupath_ext")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def file_edges() -> dict[str, set[str]]:
    """module → modules of the project it imports (at any depth of the file: lazy imports count too)."""
    known = modules()
    edges: dict[str, set[str]] = {m: set() for m in known}
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                if t in known and t != name and not name.startswith(t + "."):  # a package's own __init__ is no edge
                    edges[name].add(t)
    return edges


def unit(module: str) -> str:
    """The room a module belongs to: a subpackage of a top package, or a top-level module."""
    parts = module.split(".")
    return ".".join(parts[:2])


def unit_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for a, bs in edges.items():
        out[unit(a)]
        for b in bs:
            if unit(a) != unit(b):
                out[unit(a)].add(unit(b))
    return dict(out)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def floors(edges: dict[str, set[str]]) -> dict[str, int]:
    """Floor of each node of an acyclic graph: 1 + the highest floor it imports (1 = imports nothing)."""
    memo: dict[str, int] = {}

    def floor(v: str) -> int:
        if v not in memo:
            memo[v] = 0
            memo[v] = 1 + max((floor(w) for w in edges.get(v, ())), default=0)
        return memo[v]

    return {v: floor(v) for v in edges}


def main() -> None:
    edges = file_edges()
    units = unit_edges(edges)
    print(f"{len(edges)} files, {sum(len(v) for v in edges.values())} imports between them")
    print(f"circles between files: {cycles(edges) or 'none'}")
    print(f"circles between packages (upward imports): {cycles(units) or 'none'}")
    by_floor: dict[int, list[str]] = defaultdict(list)
    for u, f in floors(units).items():
        by_floor[f].append(u)
    for f in sorted(by_floor, reverse=True):
        print(f"floor {f:2d}: {', '.join(sorted(by_floor[f]))}")


if __name__ == "__main__":
    main()
