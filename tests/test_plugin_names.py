"""Plug-ins cannot replace the core by accident: an entry point reusing a core name (a kind, a module, an adapter,
an operation set, a host) or another plug-in's name is refused by name and the first stays as it was; a core entry
is replaced only when the user names it in `MEDCOPILOT_PLUGIN_REPLACES`, and that is logged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from copilot import plugins
from tests.test_plugins import install_metadata

SCRIPT = """
import json
from copilot import plugins
from copilot.adapters import adapters
from copilot.host.apps import hosts
from copilot.kinds import kinds
from copilot.medflow.registry import modules
from copilot.tools.operation_sets import operation_sets
found = adapters()
print(json.dumps({"kinds": sorted(kinds()), "modules": sorted(modules()), "ops": sorted(operation_sets()),
                  "hosts": sorted(hosts()), "adapters": sorted(found), "nsclc": found["nsclc"].__module__,
                  "twin": found["twin"].__name__, "problems": plugins.problems()}))
"""
CORE = {"kinds": ["pathology", "radiology"], "hosts": ["qupath", "slicer"],
        "modules": sorted(["longitudinal_mri", "brain_mri", "lung_petct", "breast_wsi", "lymph_node_wsi"]),
        "ops": sorted(["segmentation", "registration", "vista3d", "all", "none"])}  # fmt: skip


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "clash_plugin").mkdir(parents=True)
    (site / "clash_plugin" / "__init__.py").write_text(
        "def adapter(src, out, table=None, copy=False):\n    raise RuntimeError('never called here')\n\n"
        "def twin_a(src, out, table=None, copy=False):\n    pass\n\n"
        "def twin_b(src, out, table=None, copy=False):\n    pass\n",
        encoding="utf-8",
    )
    install_metadata(site, "clash-plugin", {
        plugins.KINDS_GROUP: {"radiology": "clash_plugin:adapter"},
        plugins.MODULES_GROUP: {"brain_mri": "clash_plugin:adapter"},
        plugins.ADAPTERS_GROUP: {"nsclc": "clash_plugin:adapter", "twin": "clash_plugin:twin_a"},
        plugins.OPERATION_SETS_GROUP: {"none": "clash_plugin:adapter"},
        plugins.HOSTS_GROUP: {"slicer": "clash_plugin:adapter"},
    })  # fmt: skip
    install_metadata(site, "twin-plugin", {plugins.ADAPTERS_GROUP: {"twin": "clash_plugin:twin_b"}})
    return site


def _run(site: Path, **env: str) -> tuple[dict[str, object], str]:
    done = subprocess.run([sys.executable, "-c", SCRIPT], env={**os.environ, "PYTHONPATH": str(site), **env},
                          cwd=site, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_a_plugin_reusing_a_core_name_is_refused_and_the_core_stays(tmp_path: Path) -> None:
    out, err = _run(_site(tmp_path))
    assert {k: out[k] for k in CORE} == CORE and out["nsclc"] == "copilot.adapters.nsclc"
    problems = out["problems"]
    assert isinstance(problems, dict)
    for key in ("medcopilot.kinds:radiology", "medcopilot.modules:brain_mri", "medcopilot.adapters:nsclc",
                "medcopilot.operation_sets:none", "medcopilot.hosts:slicer"):  # fmt: skip
        assert "reuses the name of the core's entry, which stays" in problems[key], key
        assert f"plug-in {key} not loaded" in err
    assert out["twin"] in ("twin_a", "twin_b") and "reuses the name of clash_plugin:twin_" in problems[
        "medcopilot.adapters:twin"]  # two plug-ins of one name: the first kept, the second refused by name


def test_replacing_a_core_entry_needs_an_explicit_logged_opt_in(tmp_path: Path) -> None:
    out, err = _run(_site(tmp_path), MEDCOPILOT_PLUGIN_REPLACES="medcopilot.adapters:nsclc")
    assert out["nsclc"] == "clash_plugin" and "medcopilot.adapters:nsclc" not in out["problems"]  # type: ignore[operator]
    assert "plug-in medcopilot.adapters:nsclc (clash_plugin:adapter) replaces the core's entry" in err
    assert {k: out[k] for k in CORE} == CORE  # the other names stay the core's
