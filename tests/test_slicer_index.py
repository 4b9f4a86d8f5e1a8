"""The Slicer extension as the Extensions Index would take it: `slicer_ext/MedCopilot.json` is valid against the
index's catalog-entry schema v1.0.2 (tests/slicer_index/, source in SOURCE.md), and the checks the index's pull
requests run (Slicer/ExtensionsIndex `scripts/check_description_files.py` at 07f1d1b2781c) pass on `slicer_ext/`,
which is the extension repository's root (published by `git subtree split --prefix slicer_ext`). The module installs
the core only after asking, and asks before anything goes to a model service. The ScriptedLoadableModuleTest runs
only inside Slicer (marked `slicer`)."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from PIL import Image

from tests.conftest import in_slicer_application

ROOT = Path(__file__).resolve().parent.parent
EXT = ROOT / "slicer_ext"  # the extension repository's root
MODULE = EXT / "MedCopilot"
sys.path.insert(0, str(MODULE))
SCHEMA = Path(__file__).parent / "slicer_index" / "slicer-extension-catalog-entry-schema-v1.0.2.json"
ENTRY = EXT / "MedCopilot.json"
RAW = "https://raw.githubusercontent.com/medcopilot/medcopilot/main/"  # the project's tree, as GitHub serves it
# the index's own patterns and lists (check_description_files.py at 07f1d1b2781c)
PROJECT_RE = r"project\s*\(\s*([^\s\)\n\r]+)"
ICON_RE = r'set\s*\(EXTENSION_ICONURL\s*"([^"]+)"[ ]*\)'
SCREENSHOTS_RE = r'set\s*\(EXTENSION_SCREENSHOTURLS\s*"([^"]+)"\)'
LICENSE_NAMES = ("LICENSE", "LICENCE", "License.txt", "license.txt", "LICENSE.txt", "COPYING", "COPYING.txt")
REPO_PREFIXES = ("Slicer", "Slicer-", "Slicer_", "SlicerExtension-", "SlicerExtension_")
SIZE_LIMIT_MB = 100


def _entry() -> dict:
    return json.loads(ENTRY.read_text())


def test_the_entry_is_valid_against_schema_v1_0_2() -> None:
    jsonschema = pytest.importorskip("jsonschema")  # in the lock file; Slicer's own Python may lack it
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    entry = _entry()
    assert entry["$schema"].split("#")[0].rsplit("/", 1)[1] == SCHEMA.name  # the version the entry names
    jsonschema.validate(entry, schema)
    for bad in ({**entry, "tier": 6}, {**entry, "homepage": "x"}, {k: v for k, v in entry.items() if k != "scm_url"}):
        with pytest.raises(jsonschema.ValidationError):  # the copy refuses what the index refuses
            jsonschema.validate(bad, schema)


def test_the_entry_passes_the_index_checks() -> None:
    raw, entry, name = ENTRY.read_bytes(), _entry(), ENTRY.stem
    assert b"\r" not in raw and not name.lower().startswith("slicer")
    url = urlsplit(entry["scm_url"])
    repo = Path(url.path).stem
    assert url.scheme == "https" and repo.startswith(REPO_PREFIXES) and repo == f"Slicer{name}"
    assert entry["category"] == "Informatics"  # one of the index's ACCEPTED_EXTENSION_CATEGORIES
    assert entry["build_subdirectory"] == "."  # no superbuild: the build tree holds the extension itself


def _local_png(url: str) -> Path:
    assert url.startswith(RAW), url
    path = ROOT / url[len(RAW) :]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", url
    return path


def test_the_top_level_cmakelists_matches_the_entry() -> None:
    cmake = (EXT / "CMakeLists.txt").read_text()
    assert re.findall(PROJECT_RE, cmake, re.IGNORECASE | re.MULTILINE)[0] == ENTRY.stem
    [icon] = re.findall(ICON_RE, cmake, re.IGNORECASE | re.MULTILINE)
    assert Image.open(_local_png(icon)).size == (128, 128)
    [shots] = re.findall(SCREENSHOTS_RE, cmake, re.IGNORECASE | re.MULTILINE)
    assert [_local_png(u).name for u in shots.split()] == ["slicer_panel.png"]
    setting = dict(re.findall(r'set\((EXTENSION_\w+) "([^"]*)"\)', cmake))
    assert setting["EXTENSION_CATEGORY"] == _entry()["category"]
    assert setting["EXTENSION_DEPENDS"] == "NA" and _entry()["build_dependencies"] == []
    assert setting["EXTENSION_HOMEPAGE"].endswith("/docs/slicer.md")


def test_the_extension_root_has_a_license_and_nothing_the_python_packager_skips() -> None:
    [license_file] = [EXT / n for n in LICENSE_NAMES if (EXT / n).is_file()]
    text = license_file.read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]["text"] == "Apache-2.0"
    files = [p for p in EXT.rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix in (".cxx", ".h")]  # Python-only: packaged by the index's workflow
    assert sum(p.stat().st_size for p in files) < SIZE_LIMIT_MB * 1024 * 1024


def test_the_core_version_and_requirement() -> None:
    from MedCopilotLib.install import CORE_VERSION, core_requirement, source_checkout

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version == CORE_VERSION
    assert source_checkout(MODULE / "MedCopilot.py") == ROOT
    assert core_requirement(ROOT) == f"medcopilot @ {ROOT.as_uri()}"
    assert core_requirement(None) == f"medcopilot=={CORE_VERSION}"  # a packaged extension: the published wheel


def test_a_packaged_extension_is_no_checkout(tmp_path: Path) -> None:
    from MedCopilotLib.install import source_checkout

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "medcopilot"\n')  # no core beside it
    assert source_checkout(tmp_path / "MedCopilot" / "MedCopilot.py") is None


class _Slicer:
    """What the module passes to `ensure_core`: Slicer's calls, recorded; the user's answer; what is installed."""

    def __init__(self, answer: bool, installs: bool = True) -> None:
        self.answer, self.installs, self.installed, self.calls = answer, installs, False, []

    def present(self) -> bool:
        return self.installed

    def pip_ensure(self, requirements: list[str], prompt_install: bool, requester: str) -> None:
        self.calls.append(("pip_ensure", requirements, prompt_install, requester))
        if not self.answer:
            raise RuntimeError("User declined package installation")
        self.installed = self.installs

    def confirm(self, message: str, details: str) -> bool:
        self.calls.append(("confirm", details))
        return self.answer

    def pip_install(self, requirement: str) -> None:
        self.calls.append(("pip_install", requirement))
        self.installed = True


def test_the_core_is_installed_only_after_asking() -> None:
    from MedCopilotLib.install import CoreNotInstalled, ensure_core

    req = "medcopilot==0.1.0"
    present = _Slicer(True)
    present.installed = True
    assert ensure_core(req, present.pip_ensure, present.confirm, present.pip_install, present.present) == "present"
    assert present.calls == []  # nothing asked, nothing installed
    yes = _Slicer(True)
    assert ensure_core(req, yes.pip_ensure, yes.confirm, yes.pip_install, yes.present) == "installed"
    assert yes.calls == [("pip_ensure", [req], True, "MedCopilot")]
    no = _Slicer(False)
    later = r"declined\)\. Nothing was changed.*pip_install\('medcopilot==0\.1\.0'\)"  # and how to install it later
    with pytest.raises(CoreNotInstalled, match=later):
        ensure_core(req, no.pip_ensure, no.confirm, no.pip_install, no.present)
    assert not no.installed
    testing = _Slicer(True, installs=False)  # pip_ensure in a --testing run installs nothing
    with pytest.raises(CoreNotInstalled, match="testing mode"):
        ensure_core(req, testing.pip_ensure, testing.confirm, testing.pip_install, testing.present)


def test_before_slicer_5_11_the_module_asks_itself() -> None:
    from MedCopilotLib.install import CoreNotInstalled, ensure_core

    yes, no = _Slicer(True), _Slicer(False)
    assert ensure_core("medcopilot==0.1.0", None, yes.confirm, yes.pip_install, yes.present) == "installed"
    assert yes.calls == [("confirm", "medcopilot==0.1.0"), ("pip_install", "medcopilot==0.1.0")]
    with pytest.raises(CoreNotInstalled):
        ensure_core("medcopilot==0.1.0", None, no.confirm, no.pip_install, no.present)
    assert no.calls == [("confirm", "medcopilot==0.1.0")]  # declined: pip never runs


def test_the_module_installs_nothing_unasked() -> None:
    code = (MODULE / "MedCopilot.py").read_text()
    assert '"-e"' not in code and "REPO_ROOT" not in code
    assert "slicer_packaging.pip_ensure" in code and "ensure_core(" in code


def test_nothing_goes_to_a_model_service_before_opt_in() -> None:
    from MedCopilotLib.consent import DEFAULT_SERVICE, OptIn, is_local, opt_in_text, service_url, uses_model

    assert service_url("", {}) == DEFAULT_SERVICE
    assert service_url("", {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}) == "http://127.0.0.1:8000/v1"
    assert service_url("https://models.example/v1", {"OPENAI_BASE_URL": "x"}) == "https://models.example/v1"
    assert is_local("http://localhost:11434/v1") and not is_local(DEFAULT_SERVICE)
    assert "outside this computer: https://api.openai.com/v1" in opt_in_text(DEFAULT_SERVICE)
    assert "on this computer" in opt_in_text("http://127.0.0.1:8000/v1")
    consent = OptIn()
    assert consent.needed(DEFAULT_SERVICE)
    consent.agree(DEFAULT_SERVICE)
    assert not consent.needed(DEFAULT_SERVICE) and consent.needed("https://models.example/v1")
    consent.forget()  # a new copilot session asks again
    assert consent.needed(DEFAULT_SERVICE)
    assert [uses_model(p) for p in ("baseline", "prior", "scripted:a.json", "openai:gpt-5")] == [0, 0, 0, 1]
    code = (MODULE / "MedCopilot.py").read_text()
    ask = code[code.index("def onAsk") : code.index("def onReject")]
    assert ask.index("opt_in.needed") < ask.index("conversation.ask(")  # the question waits for the answer


@pytest.mark.slicer
@pytest.mark.skipif(not in_slicer_application(), reason="runs inside 3D Slicer (tests/run_in_slicer.py)")
def test_the_module_test_in_slicer() -> None:  # pragma: no cover - Slicer only
    import MedCopilot

    test = MedCopilot.MedCopilotTest()
    for step in (test.test_the_core_is_present_and_nothing_is_asked, test.test_the_copilot_on_sample_data):
        test.setUp()
        step()
