"""Plug-ins by entry points: a package outside the core (tests/toy_plugin, its own pyproject.toml) installed into a
temporary site adds a viewer kind, a benchmark module with its own prompt, a dataset adapter, a Track B operation
set and a host application, and every command sees them in a fresh process with no file of `copilot/` or
`resources/` changed; a broken plug-in is reported by name and the core goes on."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from copilot import plugins

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "toy_plugin"
Run = Callable[..., subprocess.CompletedProcess[str]]


def install_metadata(site: Path, name: str, entry_points: dict[str, dict[str, str]]) -> None:
    """What an installer leaves for `importlib.metadata`: a dist-info with METADATA and entry_points.txt."""
    info = site / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n", encoding="utf-8")
    lines = [line for group, eps in entry_points.items() for line in (f"[{group}]", *(f"{k} = {v}" for k, v in
             eps.items()), "")]  # fmt: skip
    (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")


def tree_digest(*folders: Path) -> str:
    """One hash of every file under the folders (caches left out): any edit, addition or removal changes it."""
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def commands(site: Path, *extra_path: Path) -> Run:
    """`medcopilot ARGS` in a fresh process that sees the temporary site (and the extra import folders)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (site, *extra_path))), "MEDCOPILOT_DEBUG": "1"}

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "copilot.cli", *map(str, args)], env=env, cwd=site,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    return run


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy package installed into a temporary site from its own pyproject.toml (metadata; code by path)."""
    site = tmp_path_factory.mktemp("site")
    project = tomllib.loads((TOY / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    install_metadata(site, project["name"], project["entry-points"])
    return site


def core_copy(dest: Path) -> Path:
    """The core as it stands (copilot/, resources/, pyproject.toml) copied apart, so that what the commands might
    change in it is told from edits made to the working tree meanwhile; imported ahead of the installed one."""
    for name in ("copilot", "resources"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


@pytest.mark.slow  # seven commands in fresh processes, a benchmark run among them (about 10 s)
def test_a_plugin_package_adds_a_kind_a_module_and_an_adapter(toy_site: Path, tmp_path: Path) -> None:
    core = core_copy(tmp_path / "core")
    before = tree_digest(core / "copilot", core / "resources")
    run = commands(toy_site, core, TOY)
    where = subprocess.run([sys.executable, "-c", "import copilot; print(copilot.__file__)"], cwd=toy_site,
                           env={**os.environ, "PYTHONPATH": str(core)}, capture_output=True, text=True)  # fmt: skip
    assert where.stdout.strip() == str(core / "copilot" / "__init__.py")  # the copy is what the commands run
    made = run("cases", "make", "--module", "toy_count", "--n", "3", "--seed", "0", "--out", tmp_path / "cases")
    folders = [Path(line) for line in made.stdout.split()]
    assert [p.name for p in folders] == ["toy_count_000_0000", "toy_count_000_0001", "toy_count_000_0002"]
    pack = json.loads((folders[1] / "case.json").read_text(encoding="utf-8"))
    assert pack["kind"] == "toy" and json.loads((folders[1] / "hidden" / "truth.json").read_text())["label"] == 2

    bench = run("bench", "run", "--cases", tmp_path / "cases", "--policy", "prior", "--out", tmp_path / "run",
                "--workers", "1")  # fmt: skip
    assert "A prior toy_count: n=3 Task=0.33 Strict=0.33 Loc=—" in bench.stdout  # the prior says 2: one of three
    report = run("bench", "report", tmp_path / "run", "--format", "md")
    assert "Toy squares" in report.stdout

    release = tmp_path / "release"
    (release / "pictures").mkdir(parents=True)
    Image.fromarray(np.full((32, 32), 200, np.uint8)).save(release / "pictures" / "p1.png")
    (release / "labels.csv").write_text("name,squares\np1,3\np2,9\n", encoding="utf-8")
    adapted = run("cases", "adapt", "--dataset", "TOY", "--src", release, "--out", tmp_path / "adapted")
    assert "toy: 1 cases written; 1 skipped (label '9' is not 1 to 4 1)" in adapted.stdout
    assert json.loads((tmp_path / "adapted" / "toy_p1" / "case.json").read_text())["kind"] == "toy"

    traces = sorted((tmp_path / "run").rglob("trace.jsonl"))
    assert len(traces) == 3
    replayed = run("replay", traces[0].parent)  # a new process finds the kind through its entry point alone
    assert replayed.stdout.startswith("replay ok:")
    episode = run("run", "--case", tmp_path / "adapted" / "toy_p1", "--policy", "prior", "--out", tmp_path / "t1")
    assert "ANSWER: 2" in episode.stdout
    assert run("replay", tmp_path / "t1").stdout.startswith("replay ok:")

    assert tree_digest(core / "copilot", core / "resources") == before  # nothing inside the core was edited
    assert not list((core / "resources" / "prompts").glob("toy*"))  # the module owns its prompt


def headless(env: dict[str, str]) -> dict[str, str]:
    """The environment without a display: `gui` then opens no start-up window (a host's panel is its own)."""
    return {k: v for k, v in env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")} | {"QT_QPA_PLATFORM": "xcb"}


@pytest.mark.slow  # six commands in fresh processes (about 8 s)
def test_a_plugin_package_adds_an_operation_set_and_a_host(toy_site: Path, tmp_path: Path) -> None:
    """The toy's `toy_zoom` operation set and `toyview` host are offered by `bench run --ops` and `gui/serve
    --attach`; a Track B run limited to the set replays in a new process; the host's side panel adopts what the
    program shows, withholds the handler that would replace it, adds its own and carries its own prompt."""
    core = core_copy(tmp_path / "core")
    before = tree_digest(core / "copilot", core / "resources")
    run = commands(toy_site, core, TOY)
    assert "{segmentation,registration,vista3d,all,toy_zoom,none}" in run("bench", "run", "--help").stdout
    env = headless({**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (toy_site, core, TOY)))})

    def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
        """`medcopilot ARGS` with no display, whatever its exit code."""
        return subprocess.run([sys.executable, "-m", "copilot.cli", *map(str, args)], env=env, cwd=toy_site,
                              capture_output=True, text=True, timeout=120)  # fmt: skip

    assert "--attach {qupath,slicer,toyview}" in " ".join(cli("gui", "--help").stdout.split())

    run("cases", "make", "--module", "toy_count", "--n", "1", "--seed", "0", "--out", tmp_path / "cases")
    run("bench", "run", "--cases", tmp_path / "cases", "--policy", "prior", "--out", tmp_path / "run", "--workers",
        "1", "--track", "B", "--ops", "toy_zoom")  # fmt: skip
    trace = next((tmp_path / "run").rglob("trace.jsonl"))
    assert json.loads(trace.read_text(encoding="utf-8").splitlines()[0])["ops"] == "toy_zoom"
    assert run("replay", trace.parent).stdout.startswith("replay ok:")  # the set found again by its entry point

    picture = tmp_path / "open.png"
    Image.fromarray(np.full((40, 30), 90, np.uint8)).save(picture)
    panel = cli("gui", "--attach", "toyview", "--address", picture, "--trace-dir", tmp_path / "host", "--screenshot",
                tmp_path / "panel.json")  # fmt: skip
    assert panel.returncode == 0, panel.stderr
    shown = json.loads((tmp_path / "panel.json").read_text(encoding="utf-8"))
    assert shown["zoom_ok"] and "picture_size" in shown["offered"] and "zoom_picture" in shown["offered"]
    assert "open_picture" not in shown["offered"]  # withheld: it would replace the clinician's picture
    assert shown["prompt"].startswith("The clinician has this picture open in the toy program")
    events = [json.loads(line) for line in (tmp_path / "host" / "trace.jsonl").read_text().splitlines()]
    assert events[0]["backend"] == "toyview" and events[0]["module"] == "host_toyview"
    assert any(e["type"] == "handlers_withheld" and e["handlers"] == ["open_picture"] for e in events)
    script = f"from copilot.host.apps import connect_viewer; print(connect_viewer('toyview', {str(picture)!r}).state())"
    served = subprocess.run([sys.executable, "-c", script], env=env, cwd=toy_site, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert "'shape': [40, 30]" in served.stdout, served.stderr  # what `serve --attach toyview` would drive

    refused = cli("serve", "--case", tmp_path / "cases", "--attach", "slicer")
    assert refused.returncode == 2 and "the 3D Slicer host offers no connection from the command line" in refused.stderr
    assert tree_digest(core / "copilot", core / "resources") == before  # nothing inside the core was edited


def test_the_plugin_prompt_and_kind_reach_the_agent(toy_site: Path, tmp_path: Path) -> None:
    """The module's prompt file and the kind's system prompt fill the task an agent is given; its own parser and
    scorer judge the answers (a bundle: nothing of it in a core table)."""
    run = commands(toy_site, TOY)
    run("cases", "make", "--module", "toy_count", "--n", "1", "--seed", "2", "--out", tmp_path)
    case = str(tmp_path / "toy_count_002_0000")
    script = ("from copilot.agent.prompts import task_prompt; from copilot.cases.pack import load_case; "
              f"p = task_prompt(load_case({case!r}), 7); print(p.system); print(p.user); "
              "from copilot.medflow.registry import score_case; "
              f"print([(s.task, s.parse_error) for s in (score_case({case!r}, r) for r in ('ANSWER: 1', 'one'))])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (toy_site, TOY)))}
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "You read one greyscale picture" in out.stdout and "at most 7 tool calls" in out.stdout
    assert "Case toy_count_002_0000: how many bright squares" in out.stdout
    assert "[(1.0, None), (0.0, \"no 'ANSWER: <1-4>' line\")]" in out.stdout  # case seed 2000: one square


def test_a_plugin_package_adds_a_model_provider(toy_site: Path, brain_case: Path, tmp_path: Path) -> None:
    """The toy's `toyllm` provider is named in every list of providers (the policy help of `run`, `bench run` and
    `models`), lists its models and runs an episode through the agent loop, in a fresh process, core unchanged."""
    core = core_copy(tmp_path / "core")
    before = tree_digest(core / "copilot", core / "resources")
    run = commands(toy_site, core, TOY)
    for command in (("run",), ("bench", "run"), ("models",)):
        assert "toyllm[:MODEL]" in " ".join(run(*command, "--help").stdout.split())
    assert run("models", "--policy", "toyllm").stdout.split() == ["echo-1"]
    run("run", "--case", brain_case, "--policy", "toyllm:echo-1", "--out", tmp_path / "trace")
    events = [json.loads(line) for line in (tmp_path / "trace" / "trace.jsonl").read_text().splitlines()]
    start = next(e for e in events if e["type"] == "agent_start")
    assert (start["provider"], start["model"], start["wire"]) == ("toyllm", "echo-1", "toy-echo")
    assert next(e for e in events if e["type"] == "final_answer")["content"] == "ANSWER: A"
    assert tree_digest(core / "copilot", core / "resources") == before


def test_a_broken_plugin_is_named_and_the_core_goes_on(tmp_path: Path) -> None:
    """Entry points whose code is missing or is not a descriptor: each reported by group and name; the core's
    kinds, modules, adapters, operation sets and hosts all stay, and asking for the broken one says why it is not
    there."""
    site = tmp_path / "site"
    (site / "bad_plugin").mkdir(parents=True)
    (site / "bad_plugin" / "__init__.py").write_text("NOT_A_KIND = 42\n", encoding="utf-8")
    install_metadata(site, "bad-plugin", {
        plugins.KINDS_GROUP: {"ghost": "no_such_package.kind:KIND", "number": "bad_plugin:NOT_A_KIND"},
        plugins.MODULES_GROUP: {"ghost_module": "no_such_package.module:MODULE"},
        plugins.ADAPTERS_GROUP: {"ghost_data": "bad_plugin:NOT_A_KIND"},
        plugins.OPERATION_SETS_GROUP: {"ghost_ops": "bad_plugin:NOT_A_KIND"},
        plugins.HOSTS_GROUP: {"ghost_host": "no_such_package.host:HOST"},
    })  # fmt: skip
    script = """
import json
from copilot import plugins
from copilot.adapters import adapters
from copilot.kinds import kinds, viewer_kind
from copilot.host.apps import hosts
from copilot.medflow.registry import modules
from copilot.tools.operation_sets import operation_sets
out = {"kinds": list(kinds()), "modules": list(modules()), "adapters": list(adapters()), "ops": list(operation_sets()),
       "hosts": list(hosts())}
try:
    viewer_kind("number")
except ValueError as exc:
    out["error"] = str(exc)
out["problems"] = plugins.problems()
print(json.dumps(out))
"""
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=site, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["kinds"] == ["pathology", "radiology"]
    assert out["modules"] == ["longitudinal_mri", "brain_mri", "lung_petct", "breast_wsi", "lymph_node_wsi"]
    assert out["adapters"] == ["bracs", "camelyon17", "lumiere", "nsclc", "ucsf_pdgm"]
    assert out["ops"] == ["segmentation", "registration", "vista3d", "all", "none"]
    assert out["hosts"] == ["qupath", "slicer"]
    assert sorted(out["problems"]) == ["medcopilot.adapters:ghost_data", "medcopilot.hosts:ghost_host",
                                       "medcopilot.kinds:ghost", "medcopilot.kinds:number",
                                       "medcopilot.modules:ghost_module", "medcopilot.operation_sets:ghost_ops"]
    assert "expected the OperationSet 'ghost_ops', got 'int'" in out["problems"]["medcopilot.operation_sets:ghost_ops"]
    assert "No module named 'no_such_package'" in out["problems"]["medcopilot.kinds:ghost"]
    assert re.search(r"expected a ViewerKind, got int", out["problems"]["medcopilot.kinds:number"])
    assert out["error"].startswith("unknown viewer kind 'number'; known: pathology, radiology; plug-ins not loaded:")
    assert "plug-in medcopilot.kinds:ghost not loaded" in done.stderr  # logged once, by name


LISTS = """
import json
from importlib import metadata
from copilot.adapters import dataset_names
from copilot.kinds import kinds
from copilot.medflow.registry import modules
installed = any(ep.value.startswith("copilot.") for ep in metadata.entry_points(group="medcopilot.kinds"))
print(json.dumps({"installed": installed, "lists": [list(kinds()), list(modules()), dataset_names()]}))
"""


def core_lists(pythonpath: Path | None) -> dict[str, object]:
    """The kinds, modules and dataset names a fresh process finds (and whether from installed metadata)."""
    env = {**os.environ, **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
    done = subprocess.run([sys.executable, "-c", LISTS], env=env, cwd=pythonpath or ROOT / "tests", capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_core_declares_its_own_through_the_same_groups(tmp_path: Path) -> None:
    """The core's kinds, modules, adapters, operation sets and hosts are entry points of pyproject.toml; installed
    metadata (written here as an installer writes it, groups and names sorted) and the source declarations give the
    same lists."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    assert set(declared) >= set(plugins.GROUPS)
    for group in plugins.GROUPS:
        loaded = plugins.load(group)
        assert set(loaded) == set(declared[group]), plugins.problems(group)
        assert plugins.load(group) == loaded  # loaded once: the same objects again
    install_metadata(tmp_path, "medcopilot", {g: dict(sorted(eps.items())) for g, eps in sorted(declared.items())})
    fresh_install, here = core_lists(tmp_path), core_lists(None)
    assert fresh_install["installed"] and fresh_install["lists"] == here["lists"]
    modules = ["longitudinal_mri", "brain_mri", "lung_petct", "breast_wsi", "lymph_node_wsi"]
    assert here["lists"] == [["pathology", "radiology"], modules, sorted(declared[plugins.ADAPTERS_GROUP])]
