"""MONAI VISTA3D inference from a local bundle (the real bundle layout), on CPU or CUDA.

Bundle: `configs/inference.json` (`network_def` instantiated with MONAI's ConfigParser; optional
`patch_size`, `resample_spacing`, intensity window), `models/model.pt` (state dict) and
`data/jsons/label_dict.json` (class name → id). Preprocessing as the bundle does: resample to 1.5 mm,
CT window −963.8…1053.7 HU scaled to 0…1; inference by 128³ sliding windows (class prompts) or windows
around the points (point prompts); the output is resampled back to the source grid (nearest).
Weights are never downloaded: the bundle path comes from settings (`$MEDCOPILOT_VISTA3D_BUNDLE`).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from copilot.engine.geometry import inside, ras_to_lps
from copilot.engine.volume.image import Volume, sitk_image

DEFAULT_PATCH = (128, 128, 128)
DEFAULT_SPACING = (1.5, 1.5, 1.5)
CT_WINDOW = (-963.8, 1053.7)
MAX_POINTS = 20
_CACHE: dict[tuple[str, float], Vista3DBundle] = {}
_LOCK = threading.Lock()


class Vista3DError(ValueError):
    """A bundle or prompt problem, reported to the caller as is."""


def configured_bundle() -> Path | None:
    value = os.environ.get("MEDCOPILOT_VISTA3D_BUNDLE")
    return Path(value) if value else None


@dataclass
class Vista3DBundle:
    root: Path
    net: Any
    labels: dict[str, int]
    patch: tuple[int, int, int]
    spacing: tuple[float, float, float]
    window: tuple[float, float]
    device: str

    @classmethod
    def load(cls, root: Path) -> Vista3DBundle:
        weights = root / "models" / "model.pt"
        config = root / "configs" / "inference.json"
        if not weights.is_file() or not config.is_file():
            raise Vista3DError(f"{root} is not a VISTA3D bundle (needs configs/inference.json and models/model.pt)")
        key = (str(root.resolve()), weights.stat().st_mtime)
        with _LOCK:
            if key in _CACHE:
                return _CACHE[key]
        import torch
        from monai.bundle import ConfigParser

        parser = ConfigParser()
        parser.read_config(str(config))
        net = parser.get_parsed_content("network_def")
        device = "cuda" if torch.cuda.is_available() else "cpu"
        net.load_state_dict(torch.load(weights, map_location=device, weights_only=True))
        net.to(device).eval()
        cfg = parser.get() or {}
        labels_path = root / "data" / "jsons" / "label_dict.json"
        labels = (
            {str(k).lower(): int(v) for k, v in json.loads(labels_path.read_text()).items()}
            if labels_path.is_file()
            else {}
        )
        window = tuple(cfg.get("intensity_window", CT_WINDOW))
        bundle = cls(
            root,
            net,
            labels,
            tuple(cfg.get("patch_size", DEFAULT_PATCH)),
            tuple(cfg.get("resample_spacing", DEFAULT_SPACING)),
            (float(window[0]), float(window[1])),
            device,
        )
        with _LOCK:
            _CACHE[key] = bundle
        return bundle

    def class_ids(self, prompts: list[str | int]) -> list[int]:
        """Label ids for class prompts given as ids or names (the bundle's label dictionary)."""
        ids = []
        known = set(self.labels.values())
        for p in prompts:
            if isinstance(p, int) or str(p).isdigit():
                cid = int(p)
                if known and cid not in known:
                    raise Vista3DError(f"class id {cid} is not in the bundle's label dictionary")
            else:
                if str(p).lower() not in self.labels:
                    raise Vista3DError(f"unknown class {p!r}; e.g. {sorted(self.labels)[:8]}")
                cid = self.labels[str(p).lower()]
            ids.append(cid)
        return ids


def model_grid(volume: Volume, spacing: tuple[float, float, float]) -> sitk.Image:
    """The volume's grid resampled to the model spacing (same origin and direction)."""
    src = sitk_image(volume)
    size = [max(1, round(n * s / t)) for n, s, t in zip(src.GetSize(), src.GetSpacing(), spacing, strict=True)]
    grid = sitk.Image(size, sitk.sitkFloat32)
    grid.SetSpacing(spacing)
    grid.SetOrigin(src.GetOrigin())
    grid.SetDirection(src.GetDirection())
    return grid


def ras_to_model_voxel(grid: sitk.Image, ras: list[float]) -> tuple[int, int, int]:
    """Nearest voxel (i, j, k) of the model grid for a RAS point (RAS → LPS → continuous index)."""
    idx = grid.TransformPhysicalPointToContinuousIndex([float(v) for v in ras_to_lps(ras)])
    out = (round(idx[0]), round(idx[1]), round(idx[2]))
    if not inside(out, tuple(grid.GetSize())):
        raise Vista3DError(f"point {ras} lies outside the image")
    return out


def check_prompts(classes: list[str | int] | None, points: list[list[float]] | None, labels: list[int] | None) -> None:
    """The bundle's prompt rules: class prompts or point prompts; points with one label each (1 foreground,
    0 background), at least one foreground, at most 20."""
    if (classes is None) == (points is None):
        raise Vista3DError("give class prompts or point prompts (not both, not neither)")
    if points is not None:
        if labels is None or len(labels) != len(points):
            raise Vista3DError("every point needs a label (1 foreground, 0 background)")
        if any(v not in (0, 1) for v in labels):
            raise Vista3DError("point labels must be 0 (background) or 1 (foreground)")
        if 1 not in labels:
            raise Vista3DError("at least one foreground point (label 1) is needed")
        if len(points) > MAX_POINTS:
            raise Vista3DError(f"at most {MAX_POINTS} points")


def segment(
    bundle: Vista3DBundle,
    volume: Volume,
    classes: list[str | int] | None = None,
    points: list[list[float]] | None = None,
    labels: list[int] | None = None,
) -> np.ndarray:
    """Boolean mask [k, j, i] on the source grid."""
    import torch
    from monai.apps.vista3d.inferer import point_based_window_inferer
    from monai.inferers import sliding_window_inference

    check_prompts(classes, points, labels)
    grid = model_grid(volume, bundle.spacing)
    image = sitk.Resample(sitk_image(volume), grid, sitk.Transform(), sitk.sitkLinear, bundle.window[0])
    arr = sitk.GetArrayFromImage(image)  # [k, j, i]
    lo, hi = bundle.window
    arr = np.clip((arr - lo) / (hi - lo), 0.0, 1.0).astype(np.float32)
    arr = arr.transpose(2, 1, 0)  # [i, j, k]
    shape = arr.shape
    # pad (at the far end, so point indices do not move) up to at least one patch
    pad = [(0, max(0, p - n)) for p, n in zip(bundle.patch, shape, strict=True)]
    x = torch.from_numpy(np.ascontiguousarray(np.pad(arr, pad)))[None, None].to(bundle.device)
    roi = tuple(bundle.patch)
    with torch.no_grad():
        if classes is not None:
            cv = torch.tensor([[c] for c in bundle.class_ids(classes)], device=bundle.device)
            logits = sliding_window_inference(x, roi, 1, bundle.net, overlap=0.25, class_vector=cv, transpose=True)
        else:
            coords = torch.tensor([[ras_to_model_voxel(grid, p) for p in points]], device=bundle.device)  # type: ignore[union-attr]
            pl = torch.tensor([labels], device=bundle.device)
            logits = point_based_window_inferer(
                x, roi, bundle.net, coords, pl, class_vector=None, prompt_class=None, transpose=True
            )
    on = (torch.as_tensor(logits)[0] > 0).any(dim=0).cpu().numpy().astype(np.uint8)
    on = on[: shape[0], : shape[1], : shape[2]]  # [i, j, k]
    out = sitk.GetImageFromArray(on.transpose(2, 1, 0))
    out.CopyInformation(grid)
    back = sitk.Resample(out, sitk_image(volume), sitk.Transform(), sitk.sitkNearestNeighbor, 0)
    return sitk.GetArrayFromImage(back) > 0
