"""Nothing under a case's hidden/ is reachable through any handler or the server; a generated brain case,
viewed through the handlers, shows the tumour where the hidden mask says."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from copilot.cases.brain import make_brain_case
from copilot.engine.volume.loading import load_volume
from copilot.runtime import open_session
from copilot.tools import RADIOLOGY
from tests.conftest import RunningServer
from tests.oracle import deep_voxel


def _attempts(case: Path) -> list[str]:
    hidden = case / "hidden"
    link = case / "images" / "sneaky"
    if not link.exists():
        os.symlink(hidden, link)
    return [
        "images",
        "hidden",
        "hidden/",
        "hidden/truth.json",
        "hidden/mask.nii.gz",
        "./hidden/../hidden/mask.nii.gz",
        "images/../hidden",
        str(hidden),
        str(hidden / "mask.nii.gz"),
        "images/sneaky",
        "images/sneaky/mask.nii.gz",
        "../" + case.name + "/hidden/mask.nii.gz",
        "hidden\x00.nii.gz",
        "/etc/passwd",
        "~/hidden",
    ]


def test_no_handler_reaches_hidden(brain_case: Path, tmp_path: Path) -> None:
    truth = json.loads((brain_case / "hidden" / "truth.json").read_text())
    # what hidden/ holds (paths the caller itself sent may be echoed in refusals; contents never are)
    secrets = [truth["diagnosis"], "mask_labels", json.dumps(truth["lesion_centre_ras"]), "core/cyst"]
    session = open_session(brain_case, trace_dir=tmp_path / "trace")
    srv = RunningServer(session, slicer_compat=True)
    try:
        bodies = []
        for path in _attempts(brain_case):
            for name, arg in (("open_case", "dicom_dir"),):
                reply = srv.client.call(name, {arg: path})
                assert not reply.ok, path
                bodies.append(json.dumps(reply.body))
        # every string argument of every handler, given a hidden path, is refused or ignored
        for spec in RADIOLOGY.specs():
            props = spec.parameters_schema().get("properties", {})
            for arg, schema in props.items():
                if "string" in json.dumps(schema) and "enum" not in json.dumps(schema):
                    reply = srv.client.call(spec.name, {arg: "hidden/mask.nii.gz"})
                    bodies.append(json.dumps(reply.body))
        inventory = srv.client.call("observe", {"include_metadata": True, "size": 64})
        bodies.append(json.dumps(inventory.body))
        for url in (
            "/hidden/truth.json",
            "/medcopilot/v1/../../hidden/truth.json",
            "/slicer/volumes",
            "/slicer/mrml/names",
            "/medcopilot/v1/state",
            "/medcopilot/v1/trace",
        ):
            reply = srv.client.request("GET", url, raw=True)
            bodies.append(reply.body.decode("utf-8", "replace") if isinstance(reply.body, bytes) else str(reply.body))
        assert srv.client.request("GET", "/hidden/truth.json").status in (401, 404)
        gone = srv.client.call("open_case", {"dicom_dir": "hidden/no_such_file.nii.gz"}).body["error"]
        present = srv.client.call("open_case", {"dicom_dir": "hidden/truth.json"}).body["error"]
        assert gone["code"] == present["code"] == "path_outside_case"  # no existence oracle
    finally:
        srv.stop()
        (brain_case / "images" / "sneaky").unlink()
    text = "\n".join(bodies)
    for secret in secrets:
        assert secret not in text
    sources = {v.source for v in (session._viewer.volume(i) for i in session._viewer.volume_ids())}
    assert all("/hidden" not in s for s in sources)


@pytest.mark.parametrize(("label", "sequence"), [("A", "T1c"), ("B", "FLAIR"), ("E", "T1c"), ("F", "FLAIR")])
def test_generated_tumour_is_visible_where_the_mask_says(tmp_path: Path, label: str, sequence: str) -> None:
    case = make_brain_case(tmp_path, f"b{label}", 40, spacing=2.0, label=label)
    mask = load_volume(case / "hidden" / "mask.nii.gz")
    if label in ("A", "E"):  # enhancing component: the brightest on T1c
        mask.data[...] = (mask.data == 4).astype(np.float32)
        mask.__post_init__()
    ras = mask.ijk_to_ras_point(np.array(deep_voxel(mask), dtype=float))
    session = open_session(case)
    assert session.call("jump", {"ras": ras.tolist(), "size": 64}).ok
    out = session.call("select_volume", {"volume_name": sequence, "view": "red", "size": 256})
    img = np.asarray(Image.open(io.BytesIO(out.images[0].data)).convert("L")).astype(float)
    centre = img[124:132, 124:132].mean()  # the lesion is at the image centre after jump
    brain = img[60:200, 60:200]
    assert centre > np.percentile(brain[brain > 20], 90), (label, centre)
    # and the point converts back into the mask
    ras_back = session.call("image_coords_to_ras", {"view": "red", "point_1000": [500, 500]}).result["ras"]
    vox = mask.nearest_voxel(np.array(ras_back))
    assert vox is not None and load_volume(case / "hidden" / "mask.nii.gz").data[vox[2], vox[1], vox[0]] > 0


def test_file_links_under_images_may_point_outside_but_folder_links_may_not(brain_case: Path, tmp_path: Path) -> None:
    """Dataset adapters link source files into images/; a linked folder would expose its neighbours."""
    from copilot.tools.args import resolve_case_path
    from copilot.tools.registry import HandlerContext

    outside = tmp_path / "dataset"
    outside.mkdir()
    (outside / "scan.nii.gz").write_bytes(b"x")
    (outside / "seg.nii.gz").write_bytes(b"y")
    (brain_case / "images" / "scan_link.nii.gz").symlink_to(outside / "scan.nii.gz")
    (brain_case / "images" / "dir_link").symlink_to(outside)
    ctx = HandlerContext(None, brain_case, [])
    try:
        assert resolve_case_path(ctx, "images/scan_link.nii.gz").resolve() == (outside / "scan.nii.gz").resolve()
        for bad in ("images/dir_link/seg.nii.gz", "images/dir_link", str(outside / "seg.nii.gz")):
            with pytest.raises(Exception, match="outside the case"):
                resolve_case_path(ctx, bad)
    finally:
        (brain_case / "images" / "scan_link.nii.gz").unlink()
        (brain_case / "images" / "dir_link").unlink()
