"""VISTA3D: the whole path (bundle folder → prompts → inference → back to the source grid → segment) with a
small VISTA3D-architecture network saved in the bundle layout; point prompts land on the hand-computed voxel
for LPS- and RAS-oriented, anisotropic inputs; the prompt rules are enforced."""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from copilot.engine.ops import vista3d
from copilot.engine.volume.viewer import EmbeddedVolumeViewer
from copilot.session import Session
from copilot.tools import RADIOLOGY
from tests.conftest import make_volume

# torch and monai are imported by the fixtures that use them, so that collecting the suite stays quick
pytestmark = pytest.mark.skipif(
    find_spec("torch") is None or find_spec("monai") is None, reason="needs torch and monai"
)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from monai.networks.nets import vista3d132

    root = tmp_path_factory.mktemp("vista3d_bundle")
    (root / "configs").mkdir()
    (root / "models").mkdir()
    (root / "data" / "jsons").mkdir(parents=True)
    (root / "configs" / "inference.json").write_text(
        json.dumps(
            {
                "network_def": {"_target_": "monai.networks.nets.vista3d132", "encoder_embed_dim": 8, "in_channels": 1},
                "patch_size": [32, 32, 32],
                "resample_spacing": [1.5, 1.5, 1.5],
            }
        )
    )
    (root / "data" / "jsons" / "label_dict.json").write_text(json.dumps({"liver": 1, "kidney": 2, "spleen": 3}))
    torch.manual_seed(0)
    torch.save(vista3d132(encoder_embed_dim=8).state_dict(), root / "models" / "model.pt")
    return root


def _ct(direction: np.ndarray | None = None) -> object:
    vol = make_volume(
        dims=(30, 24, 12),
        spacing=(0.8, 1.2, 3.0),
        direction=direction,
        origin=(-10.0, 20.0, -5.0),
        name="CT",
        fill=-800.0,
        modality="CT",
    )
    vol.data[3:9, 8:16, 10:20] = 60.0
    vol.__post_init__()
    return vol


@pytest.mark.parametrize("orientation", ["RAS", "LPS"])
def test_point_prompt_lands_on_the_hand_computed_voxel(orientation: str) -> None:
    """RAS-oriented storage: IJK axes along +R, +A, +S; LPS-oriented: along −R, −A, +S (i.e. +L, +P, +S)."""
    direction = np.eye(3) if orientation == "RAS" else np.diag([-1.0, -1.0, 1.0])
    vol = _ct(direction)
    grid = vista3d.model_grid(vol, (1.5, 1.5, 1.5))
    # the model grid keeps origin and direction; 1.5 mm spacing; size = round(n·s / 1.5)
    assert grid.GetSize() == (round(30 * 0.8 / 1.5), round(24 * 1.2 / 1.5), round(12 * 3.0 / 1.5))
    ras = [-10.0 + direction[0, 0] * 9.0, 20.0 + direction[1, 1] * 6.0, -5.0 + 12.0]
    # by hand: offsets from the origin along each IJK axis are 9, 6 and 12 mm → 6, 4, 8 voxels of 1.5 mm
    assert vista3d.ras_to_model_voxel(grid, ras) == (6, 4, 8)
    with pytest.raises(vista3d.Vista3DError, match="outside"):
        vista3d.ras_to_model_voxel(grid, [500.0, 0.0, 0.0])


def _session(vol) -> Session:
    viewer = EmbeddedVolumeViewer()
    viewer.recover_standard_views(viewer.add_volume(vol))
    return Session(viewer, RADIOLOGY, track="B")


def test_whole_path_from_bundle_to_segment(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDCOPILOT_VISTA3D_BUNDLE", str(bundle))
    vol = _ct()
    session = _session(vol)
    before = vol.data.copy()
    out = session.call(
        "vista3d_segment", {"volume": "CT", "output_segment": "liver_v3d", "class_prompts": ["liver"], "size": 96}
    )
    assert out.ok, out.error
    _sid, seg = session._viewer.segment("liver_v3d")
    assert seg.mask.data.shape == vol.data.shape and np.allclose(seg.mask.ijk_to_ras, vol.ijk_to_ras)
    assert seg.provenance["class_prompts"] == ["liver"] and seg.provenance["device"] in ("cpu", "cuda")
    points = session.call(
        "vista3d_segment",
        {
            "volume": "CT",
            "output_segment": "from_points",
            "points_ras": [[-2.0, 32.0, 10.0], [5.0, 25.0, 20.0]],
            "point_labels": [1, 0],
            "size": 96,
        },
    )
    assert points.ok or points.error["code"] == "empty_segment", points.error
    assert np.array_equal(vol.data, before)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"class_prompts": ["liver"], "points_ras": [[0, 0, 0]], "point_labels": [1]}, "not both"),
        ({}, "not neither"),
        ({"points_ras": [[-2.0, 32.0, 10.0]]}, "needs a label"),
        ({"points_ras": [[-2.0, 32.0, 10.0]], "point_labels": [0]}, "foreground point"),
        ({"points_ras": [[-2.0, 32.0, 10.0]], "point_labels": [2]}, "0 .background. or 1"),
        ({"class_prompts": ["brain"]}, "unknown class"),
        ({"class_prompts": [99]}, "not in the bundle"),
        ({"points_ras": [[900.0, 0.0, 0.0]], "point_labels": [1]}, "outside"),
    ],
)
def test_prompt_rules_are_enforced(bundle: Path, monkeypatch: pytest.MonkeyPatch, args: dict, message: str) -> None:
    monkeypatch.setenv("MEDCOPILOT_VISTA3D_BUNDLE", str(bundle))
    session = _session(_ct())
    state = json.dumps(session.snapshot(), sort_keys=True)
    out = session.call("vista3d_segment", {"volume": "CT", "output_segment": "s", **args})
    assert out.error["code"] == "invalid_prompt" and __import__("re").search(message, out.error["message"])
    assert json.dumps(session.snapshot(), sort_keys=True) == state


def test_without_a_bundle_the_handler_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEDCOPILOT_VISTA3D_BUNDLE", raising=False)
    out = _session(_ct()).call("vista3d_segment", {"volume": "CT", "output_segment": "s", "class_prompts": [1]})
    assert out.error["code"] == "not_configured" and "MEDCOPILOT_VISTA3D_BUNDLE" in out.error["message"]
