"""Brain case packs (deterministic, hidden truth unreachable) and the command line (serve, cases make)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from copilot.cases.pack import load_case
from copilot.cli import main
from copilot.engine.volume.loading import load_volume
from copilot.medflow import make_cases
from copilot.server.client import RemoteViewer


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_case_pack_layout_and_truth(brain_case: Path) -> None:
    case = load_case(brain_case)
    assert case.module == "brain_mri" and case.kind == "radiology"
    assert case.inputs["volumes"] == [f"images/{s}.nii.gz" for s in ("T1", "T1c", "T2", "FLAIR")]
    truth = json.loads((brain_case / "hidden" / "truth.json").read_text())
    assert truth["label"] == "A"
    mask = load_volume(brain_case / "hidden" / "mask.nii.gz")
    flair = load_volume(brain_case / "images" / "FLAIR.nii.gz")
    assert np.allclose(mask.ijk_to_ras, flair.ijk_to_ras)  # mask on the evidence series' grid
    assert set(np.unique(mask.data).tolist()) == {0.0, 1.0, 2.0, 4.0}
    centre = mask.nearest_voxel(np.array(truth["lesion_centre_ras"]))
    assert centre is not None and mask.data[centre[2], centre[1], centre[0]] > 0
    # the lesion is visible: FLAIR is brighter in oedema than in normal white matter
    t = flair.data
    assert t[mask.data == 2].mean() > 1.4 * np.median(t[(mask.data == 0) & (t > np.percentile(t, 60))])
    assert "hidden" not in json.dumps(json.loads((brain_case / "case.json").read_text()))


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = make_cases("brain_mri", 1, 3, tmp_path / "a", spacing=3.0)[0]
    b = make_cases("brain_mri", 1, 3, tmp_path / "b", spacing=3.0)[0]
    c = make_cases("brain_mri", 1, 4, tmp_path / "c", spacing=3.0)[0]
    assert _digest(a) == _digest(b)
    assert _digest(a)["hidden/mask.nii.gz"] != _digest(c)["hidden/mask.nii.gz"]
    img = sitk.ReadImage(str(a / "images" / "T1.nii.gz"))
    assert img.GetSpacing() == (3.0, 3.0, 3.0)


def test_cases_make_command(tmp_path: Path, capsys) -> None:
    assert main(["cases", "make", "--module", "brain_mri", "--n", "2", "--seed", "5", "--out", str(tmp_path),
                 "--spacing", "4"]) == 0  # fmt: skip
    made = capsys.readouterr().out.split()
    assert len(made) == 2 and all((Path(p) / "case.json").is_file() for p in made)
    assert main(["cases", "make", "--module", "brain_mri", "--n", "0", "--out", str(tmp_path)]) == 2


def test_serve_command_prints_listening_line_and_serves(brain_case: Path, tmp_path: Path) -> None:
    env = {**os.environ, "MEDCOPILOT_TOKEN": "t0ken"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "copilot.cli", "serve", "--case", str(brain_case), "--port", "0",
         "--trace-dir", str(tmp_path / "trace"), "--slicer-compat"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:")
        client = RemoteViewer(line.split()[-1], "t0ken")
        assert client.call("ping", {}).result["status"] == "ok"
        assert client.call("set_slice_offset", {"view": "red", "offset": 0, "size": 64}).ok
        assert RemoteViewer(line.split()[-1], "bad").call("ping", {}).status == 401
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    events = (tmp_path / "trace" / "trace.jsonl").read_text().splitlines()
    assert [json.loads(e).get("handler") for e in events[1:4]] == ["open_case", "ping", "set_slice_offset"]
    assert json.loads(events[-1])["type"] == "episode_end"  # SIGTERM closes the trace cleanly
