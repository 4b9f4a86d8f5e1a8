"""The desktop opens a plug-in kind's case: the toy package (tests/toy_plugin) installed into a temporary site, a
fresh `medcopilot gui CASE --run scripted:… --screenshot` shows its picture in the kind's own view (fitted,
proportions kept) as the agent's zoom left it, the copilot panel's run traced, and no file of the core changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from copilot.cases.pack import write_pack
from tests.test_plugins import TOY, core_copy, install_metadata, tree_digest

BACKGROUND = 100  # the picture's grey: told apart from the black around it and from the window's own greys


def toy_case(root: Path) -> Path:
    """A toy case whose 64×64 grey picture has bright squares at its top left and bottom right only."""
    pixels = np.full((64, 64), BACKGROUND, np.uint8)
    pixels[8:24, 8:24] = 255
    pixels[40:56, 40:56] = 255
    (root / "images").mkdir(parents=True)
    Image.fromarray(pixels).save(root / "images" / "picture.png")
    return write_pack(root, "toy_count", {"picture": "images/picture.png"}, {}, {"label": 2}, kind="toy")


@pytest.mark.heavy  # Qt widgets in two fresh processes (about 7 s)
def test_the_desktop_opens_a_plugin_kind_case(tmp_path: Path) -> None:
    site = tmp_path / "site"
    project = tomllib.loads((TOY / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    install_metadata(site, project["name"], project["entry-points"])
    core = core_copy(tmp_path / "core")
    before = tree_digest(core / "copilot", core / "resources")
    case = toy_case(tmp_path / "toy_case")
    shot, trace, script = tmp_path / "shot.png", tmp_path / "trace", tmp_path / "zoom.json"
    script.write_text(json.dumps({"calls": [{"handler": "zoom_picture", "args": {"factor": 2}}],
                                  "answer": "ANSWER: 2"}), encoding="utf-8")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (site, core, TOY))), "QT_QPA_PLATFORM": "offscreen",
           "MEDCOPILOT_SESSIONS": str(tmp_path / "sessions")}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "copilot.cli", "gui", str(case), "--run", f"scripted:{script}",
                           "--trace-dir", str(trace), "--screenshot", str(shot)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "cannot open" not in done.stderr

    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    grey = (np.abs(pixels - BACKGROUND) <= 3).all(axis=2)
    cols, rows = np.flatnonzero(grey.sum(axis=0) > 100), np.flatnonzero(grey.sum(axis=1) > 100)
    x0, x1, y0, y1 = cols[0], cols[-1] + 1, rows[0], rows[-1] + 1  # where the picture lies in the window
    assert x1 - x0 > 300 and abs((x1 - x0) - (y1 - y0)) <= 2  # fitted to its pane, square as it is

    def at(px: int, py: int) -> list[int]:
        """The screenshot's colour at the middle of pixel (px, py) of the picture's centre half (zoomed ×2)."""
        return pixels[y0 + int((py + 0.5) * (y1 - y0) / 32), x0 + int((px + 0.5) * (x1 - x0) / 32)].tolist()

    assert at(3, 3) == at(28, 28) == [255, 255, 255]  # the squares' inner corners, as the agent's zoom shows them
    assert at(28, 3) == at(3, 28) == at(16, 16) == [BACKGROUND] * 3  # and nothing where there is none
    assert pixels[y0 + 5, x0 - 5].tolist() == [0, 0, 0]  # black beside it, in the rest of the pane

    events = [json.loads(line) for line in (trace / "trace.jsonl").read_text(encoding="utf-8").splitlines()]
    assert events[0]["kind"] == "toy" and events[0]["module"] == "toy_count"
    calls = [(e["handler"], e["actor"], e["args"]) for e in events if e["type"] == "handler_call"]
    assert calls == [("open_picture", "system", {}), ("zoom_picture", "agent", {"factor": 2.0})]
    assert any(e["type"] == "answer_evidence" for e in events)  # the copilot panel took the agent's answer
    refused = subprocess.run([sys.executable, "-m", "copilot.cli", "gui", str(case), "--run", "baseline",
                              "--screenshot", str(tmp_path / "no.png")], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)  # fmt: skip
    assert refused.returncode == 2 and "the toy_count module has no offline baseline" in refused.stderr  # it has none
    assert tree_digest(core / "copilot", core / "resources") == before  # nothing inside the core was edited
