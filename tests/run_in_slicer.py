"""Run the shared contract tests and the adopt-the-scene test inside 3D Slicer against its own scene:

    Slicer --no-main-window --python-script tests/run_in_slicer.py

Installs the core and the test tools into Slicer's Python (slicer.util.pip_install), then runs
pytest with MEDCOPILOT_BACKEND=slicer: the contract tests' `slicer` backend (and every unparametrized
`session` fixture) then runs on slicer.mrmlScene, the same code as on slicer-core; tests/test_slicer_host.py
loads a volume with slicer.util.loadVolume into slicer.mrmlScene, sets the user's window/level, layout and
slices, and has the copilot adopt the application's scene (the agent's calls run on this main thread).
"""

import os
import sys
from pathlib import Path

import slicer

ROOT = Path(__file__).resolve().parent.parent
slicer.util.pip_install(["-e", str(ROOT)])
slicer.util.pip_install(["pytest", "hypothesis"])
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "slicer_ext" / "MedCopilot"))
os.environ["MEDCOPILOT_BACKEND"] = "slicer"
import pytest  # noqa: E402

code = pytest.main(
    [
        str(ROOT / "tests" / "test_contract.py"),
        str(ROOT / "tests" / "test_slicer_ext.py"),
        str(ROOT / "tests" / "test_slicer_index.py"),
        str(ROOT / "tests" / "test_slicer_host.py"),
        "-q",
        "-k",
        "not http",  # in-process calls only: Slicer's scene belongs to its main thread
        "-p",
        "no:cacheprovider",
    ]
)
slicer.util.exit(int(code))
