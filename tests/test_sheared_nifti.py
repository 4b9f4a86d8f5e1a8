"""A NIfTI whose only transform (the sform, qform 0) shears the voxel grid is refused by name with the reason, by
the loader and by every study-taking path (a study session), never with SimpleITK's raw exception."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from copilot.engine.volume.image import VolumeLoadError
from copilot.engine.volume.loading import load_volume


def sheared(path: Path, qform: bool = False) -> Path:
    """8³ voxels whose second axis leans 16.7° towards the first (cos 0.287)."""
    affine = np.array([[1, 0.3, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], float)
    img = nib.Nifti1Image(np.arange(512, dtype=np.float32).reshape(8, 8, 8), affine)
    img.header.set_sform(affine, code=1)
    img.header.set_qform(np.eye(4) if qform else None, code=1 if qform else 0)
    nib.save(img, path)
    return path


def test_the_loader_names_the_shear(tmp_path: Path) -> None:
    with pytest.raises(VolumeLoadError) as refused:
        load_volume(sheared(tmp_path / "shear.nii.gz"))
    assert refused.value.code == "sheared_grid"
    assert "shears the voxel grid (axes 73.3° apart, not 90°)" in str(refused.value)
    assert "cannot be shown as acquired" in str(refused.value)


def test_a_qform_beside_the_sheared_sform_is_read(tmp_path: Path) -> None:
    """With a qform, ITK places the grid by it (orthogonal by construction): the volume opens."""
    vol = load_volume(sheared(tmp_path / "both.nii.gz", qform=True))
    assert vol.data.shape == (8, 8, 8)


def test_a_study_session_refuses_it_by_name(tmp_path: Path) -> None:
    from copilot.panel.studies import open_study, study_at

    path = sheared(tmp_path / "shear.nii.gz")
    with pytest.raises(Exception) as refused:
        open_study(study_at(path), tmp_path / "trace")
    assert "sheared_grid" in f"{getattr(refused.value, 'code', '')} {refused.value}" or "shears the voxel grid" in str(
        refused.value
    )
    assert "RuntimeError" not in str(refused.value) and "orthonormal" not in str(refused.value)
