"""The Slicer extension: its files compile, its Slicer-independent parts import and work here, every
handler's implementation on the slicer backend is listed, and each Slicer API the extension and the
backend use is documented in docs/slicer.md.
Tests marked `slicer` run only inside 3D Slicer (tests/run_in_slicer.py)."""

from __future__ import annotations

import json
import py_compile
import re
import sys
from pathlib import Path

import pytest

from copilot.tools import RADIOLOGY
from tests.conftest import in_slicer_application

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "slicer_ext" / "MedCopilot"
sys.path.insert(0, str(MODULE))
IN_SLICER = in_slicer_application()


def test_module_files_compile_and_are_listed_in_cmake() -> None:
    files = sorted(MODULE.rglob("*.py"))
    assert len(files) >= 6
    cmake = (MODULE / "CMakeLists.txt").read_text()
    for f in files:
        py_compile.compile(str(f), doraise=True)
        if "Testing" not in f.parts:
            assert f.relative_to(MODULE).as_posix().replace("MedCopilot", "${MODULE_NAME}", 1) in cmake, f
    assert "slicerMacroBuildScriptedModule" in cmake
    top = (ROOT / "slicer_ext" / "CMakeLists.txt").read_text()
    for key in (
        "EXTENSION_HOMEPAGE",
        "EXTENSION_DESCRIPTION",
        "Slicer_EXTENSION_GENERATE_CONFIG",
        "add_subdirectory(MedCopilot)",
    ):
        assert key in top


def test_every_handler_has_a_slicer_implementation() -> None:
    from MedCopilotLib.mapping import HANDLER_IMPLEMENTATION

    assert set(HANDLER_IMPLEMENTATION) == set(RADIOLOGY.names())
    assert all(who in ("Slicer", "partly", "project") and how for who, how in HANDLER_IMPLEMENTATION.values())


def test_the_readme_lists_what_serves_each_handler() -> None:
    """The README's handler list says, for every handler, whether Slicer's libraries serve it."""
    from MedCopilotLib.mapping import HANDLER_IMPLEMENTATION

    readme = (ROOT / "README.md").read_text()
    for name, (who, how) in HANDLER_IMPLEMENTATION.items():
        assert f"| `{name}` | {who} | {how} |" in readme, name


def test_ui_names_match_the_widget() -> None:
    ui = (MODULE / "Resources" / "UI" / "MedCopilot.ui").read_text()
    names = set(re.findall(r'name="(\w+)"', ui))
    used = set(re.findall(r"self\.ui\.(\w+)", (MODULE / "MedCopilot.py").read_text()))
    assert used <= names
    params = set(re.findall(r"<string>(\w+)</string></property>", ui))
    assert {"caseDir", "policy", "track", "port", "approveEachAction"} <= params


def test_slicer_apis_are_documented() -> None:
    doc = (ROOT / "docs" / "slicer.md").read_text()
    backend = ROOT / "copilot" / "slicer_backend"
    code = "\n".join(p.read_text() for p in [*MODULE.rglob("*.py"), *backend.rglob("*.py")])
    apis = set(re.findall(r"\.((?:Set|Get|Add|Update|Create|Remove|Jump)[A-Z]\w+)\(", code))
    apis |= set(re.findall(r"slicer\.util\.(\w+)", code))
    apis |= {"WebServerLogic", "BaseRequestHandler", "parameterNodeWrapper", "layoutManager"}
    missing = sorted(a for a in apis if a not in doc)
    assert missing == []


def test_web_handler_routes_on_a_session(session) -> None:
    from MedCopilotLib.web_handler import route

    def call(method: str, uri: str, body: dict | None = None) -> dict:
        ctype, out = route(session, "tok", method, uri.encode(), json.dumps(body).encode() if body else b"")
        assert ctype == b"application/json"
        return json.loads(out)

    assert call("GET", "/medcopilot/v1/state")["status"] == 401
    assert call("GET", "/medcopilot/v1/state?access_token=nope")["status"] == 401
    handlers = call("GET", "/medcopilot/v1/handlers?access_token=tok")["handlers"]
    assert {h["name"] for h in handlers} == {s.name for s in RADIOLOGY.specs("A")}
    ok = call(
        "POST", "/medcopilot/v1/handlers/set_slice_offset?access_token=tok", {"view": "red", "offset": 0, "size": 64}
    )
    assert ok["ok"] and ok["state"]["views"]["red"]["offset"] == 0.0 and ok["images"][0]["data_base64"]
    bad = call("POST", "/medcopilot/v1/handlers/set_slice_offset?access_token=tok", {"view": "red", "offset": 1e9})
    assert bad["ok"] is False and bad["status"] == 422 and bad["error"]["code"] == "offset_out_of_range"
    assert call("GET", "/slicer/exec?access_token=tok")["status"] == 404


@pytest.mark.slicer
@pytest.mark.skipif(not IN_SLICER, reason="runs inside 3D Slicer (tests/run_in_slicer.py)")
def test_the_viewer_state_is_slicers_scene(session) -> None:  # pragma: no cover - Slicer only
    import slicer

    out = session.call("set_slice_offset", {"view": "red", "offset": 0, "size": 64})
    assert out.ok
    node = slicer.mrmlScene.GetNodeByID("vtkMRMLSliceNodeRed")
    assert abs(node.GetSliceOffset() - 0.0) < 1e-6
    comp = slicer.mrmlScene.GetNodeByID("vtkMRMLSliceCompositeNodeRed")
    assert comp.GetBackgroundVolumeID() == session._viewer.state()["background_volume"]


def test_the_batch_script_runs_the_slicer_backend(brain_case: Path, tmp_path: Path) -> None:
    """The in-Slicer batch script's logic, here on slicer-core's standalone scene: results and traces."""
    pytest.importorskip("slicer_core")
    from MedCopilotLib.batch import main

    from copilot.medflow.runs import read_results

    out = tmp_path / "run"
    assert main(["--cases", str(brain_case.parent), "--policy", "prior", "--out", str(out), "--budget", "3"]) == 0
    [row] = read_results(out / "results.sqlite")
    assert row["backend"] == "slicer" and row["status"] != "error"
    head = (out / row["trace_dir"]).glob("*.jsonl")
    assert '"backend":"slicer"' in next(iter(head)).read_text().splitlines()[0]
