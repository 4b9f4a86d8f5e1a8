"""The core stays free of Qt, Slicer and Java bridges: a static check of every import in copilot/. Slicer's
Qt-free MRML libraries (slicer-core) are allowed in the slicer backend's package only."""

from __future__ import annotations

import ast
from pathlib import Path

FORBIDDEN = (
    "PySide6",
    "PySide2",
    "PyQt5",
    "PyQt6",
    "qt",
    "slicer",
    "vtkmodules.qt",
    "jpype",
    "py4j",
    "paquo",
    "ctk",
    "mrml",
    "slicer_core",
)
CORE = Path(__file__).resolve().parent.parent / "copilot"
GUI_ALLOWED = CORE / "gui"  # the desktop app's widgets may use Qt; its view-models live outside gui/
SLICER_BACKEND = CORE / "slicer_backend"  # the slicer backend may use slicer-core (and only slicer-core)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_core_imports_no_host_or_gui_modules() -> None:
    offenders = []
    files = [p for p in CORE.rglob("*.py") if GUI_ALLOWED not in p.parents]
    assert len(files) > 20
    for path in files:
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "slicer_core" and SLICER_BACKEND in path.parents:
                continue
            if top in FORBIDDEN or name in FORBIDDEN:
                offenders.append(f"{path.relative_to(CORE)}: {name}")
    assert offenders == []


def test_slicer_core_is_imported_only_when_the_backend_is_chosen() -> None:
    """Importing the core, the handlers and the servers never loads slicer-core."""
    import subprocess
    import sys

    code = (
        "import sys, copilot.runtime, copilot.cli, copilot.server.http, copilot.slicer_backend;"
        "print('slicer_core' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_checker_catches_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import slicer\nfrom PySide6.QtCore import Qt\nfrom jpype import JClass\n")
    assert [n.split(".")[0] for n in _imports(bad)] == ["slicer", "PySide6", "jpype"]
