"""Loading within its own size: a NIfTI volume at the voxel budget peaks at most 1.5× its voxel bytes above the
process's baseline (measured in a child process), and the direct reader gives exactly what ITK gives."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import SimpleITK as sitk

from copilot.engine.volume.image import affine_from_sitk, check_nifti_complete
from copilot.engine.volume.loading import load_volume
from copilot.engine.volume.nifti_direct import read_nifti_direct

CHILD = r"""
import json, re, sys
def kib(key): return int(re.search(key + r":\s+(\d+)", open("/proc/self/status").read()).group(1)) * 1024
from copilot.engine.volume.loading import load_volume
base = kib("VmRSS")
volume = load_volume(sys.argv[1])
print(json.dumps({"shape": list(volume.data.shape), "bytes": volume.data.nbytes, "peak": kib("VmHWM") - base,
                  "range": list(volume.value_range)}))
"""


def _header(shape: tuple[int, ...], dtype: type, affine: np.ndarray, order: str = "<") -> nib.Nifti1Header:
    header = nib.Nifti1Header(endianness=order)
    header.set_data_shape(shape)
    header.set_data_dtype(dtype)
    header.set_qform(affine, code=1)
    header.set_sform(affine, code=1)
    header["vox_offset"] = 352
    return header


def test_a_volume_at_the_budget_loads_within_one_and_a_half_times_its_bytes(tmp_path: Path) -> None:
    """2^25 voxels (the budget set for the child: 128 MiB as float32) from a gzip file of about 0.5 MiB."""
    voxels, shape = 1 << 25, (256, 256, 512)
    path = tmp_path / "budget.nii.gz"
    with gzip.open(path, "wb", compresslevel=1) as fh:  # written as a stream: the test never holds it whole
        fh.write(_header(shape, np.float32, np.diag([0.5, 0.5, 1.0, 1.0])).binaryblock + b"\0" * 4)
        block = np.zeros(1 << 22, np.float32)
        block[:3] = (-5.0, 7.5, np.nan)
        for _ in range(voxels // block.size):
            fh.write(block.tobytes())
    assert path.stat().st_size < 2 << 20
    env = {**os.environ, "MEDCOPILOT_MAX_VOXELS": str(voxels)}
    run = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, env=env,
                         timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert report["shape"] == [512, 256, 256] and report["bytes"] == 4 * voxels
    assert report["range"] == [-5.0, 7.5]
    assert report["peak"] <= 1.5 * report["bytes"], report["peak"] / report["bytes"]


@pytest.mark.parametrize(
    ("dtype", "slope", "inter", "order"),
    [(np.float32, 0.0, 0.0, "<"), (np.int16, 2.5, -3.0, "<"), (np.uint8, 1.0, 0.0, ">"), (np.float64, 0.5, 1.0, ">"),
     (np.int32, 0.0, 0.0, ">")],
)  # fmt: skip
def test_the_direct_reader_equals_itk(tmp_path: Path, dtype: type, slope: float, inter: float, order: str) -> None:
    rng = np.random.default_rng(7)
    data = (rng.normal(0, 300, (7, 5, 3)) if np.dtype(dtype).kind == "f" else rng.integers(0, 200, (7, 5, 3)))
    affine = np.array([[0.0, -0.9, 0.1, 10.0], [1.1, 0.0, 0.0, -20.0], [0.0, 0.05, 2.0, 5.5], [0, 0, 0, 1]])
    header = _header(data.shape, dtype, affine, order)
    header["scl_slope"], header["scl_inter"] = slope, inter  # as stored, nibabel's checks aside
    raw = header.binaryblock + b"\0" * 4 + data.astype(header.get_data_dtype()).tobytes(order="F")  # x fastest
    (tmp_path / "v.nii").write_bytes(raw)
    (tmp_path / "v.nii.gz").write_bytes(gzip.compress(raw))
    for name in ("v.nii", "v.nii.gz"):
        assert read_nifti_direct(tmp_path / name, check_nifti_complete(tmp_path / name)) is not None  # not ITK's
        ours = load_volume(tmp_path / name)
        itk = sitk.ReadImage(str(tmp_path / name), sitk.sitkFloat32)
        assert np.array_equal(ours.data, sitk.GetArrayFromImage(itk), equal_nan=True)
        assert np.allclose(ours.ijk_to_ras, affine_from_sitk(itk), atol=0, rtol=0)
