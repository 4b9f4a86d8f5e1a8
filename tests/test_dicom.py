"""DICOM files that pydicom ships load with the geometry their patient-space tags state."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.data import get_testdata_file

from copilot.engine.volume.dicom import load_dicom_series, volume_from_datasets
from copilot.engine.volume.loading import load_volume
from tests.conftest import rotation


def _expected_ras(ds: pydicom.Dataset, col: int, row: int) -> np.ndarray:
    """RAS of pixel (column, row) from ImagePositionPatient/ImageOrientationPatient/PixelSpacing."""
    ipp = np.array([float(v) for v in ds.ImagePositionPatient])
    iop = np.array([float(v) for v in ds.ImageOrientationPatient])
    dr, dc = (float(v) for v in ds.PixelSpacing)  # row spacing, column spacing
    lps = ipp + col * dc * iop[:3] + row * dr * iop[3:]
    return np.array([-lps[0], -lps[1], lps[2]])


@pytest.mark.parametrize("name", ["CT_small.dcm", "MR_small.dcm"])
def test_packaged_dicom_matches_its_position_and_orientation(name: str) -> None:
    path = Path(get_testdata_file(name))
    ds = pydicom.dcmread(path)
    vol = load_volume(path)
    assert vol.dimensions == (int(ds.Columns), int(ds.Rows), 1)
    for col, row in [(0, 0), (ds.Columns - 1, 0), (0, ds.Rows - 1), (17, 42)]:
        got = vol.ijk_to_ras_point(np.array([col, row, 0.0]))
        assert np.allclose(got, _expected_ras(ds, col, row), atol=1e-4), (col, row)
    # pixel values are rescaled the same way by SimpleITK and by the pydicom path
    ref = volume_from_datasets([ds], "ref")
    assert np.allclose(ref.ijk_to_ras[:3, 3], vol.ijk_to_ras[:3, 3], atol=1e-4)
    assert np.allclose(ref.data, vol.data)
    assert vol.modality == ds.Modality


def _write_oblique_series(folder: Path, n: int = 6) -> list[pydicom.Dataset]:
    """An oblique, anisotropic series derived from CT_small, slice files written in shuffled order."""
    base = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    rot = rotation(0.3, -0.2, 0.5)
    row_dir, col_dir = rot[:, 0], rot[:, 1]
    normal = np.cross(row_dir, col_dir)
    folder.mkdir()
    written = []
    for k in range(n):
        ds = copy.deepcopy(base)
        ds.ImageOrientationPatient = [f"{v:.6f}" for v in (*row_dir, *col_dir)]
        ds.PixelSpacing = ["0.7", "0.9"]
        ds.SliceThickness = "2.5"
        pos = np.array([-30.0, 12.0, 40.0]) + k * 2.5 * normal
        ds.ImagePositionPatient = [f"{v:.6f}" for v in pos]
        ds.InstanceNumber = k + 1
        ds.SOPInstanceUID = pydicom.uid.generate_uid()
        arr = base.pixel_array.copy()
        arr[k : k + 3, 5:9] = 1000 + k
        ds.PixelData = arr.tobytes()
        ds.save_as(folder / f"slice_{(k * 7) % n:03d}.dcm")
        written.append(ds)
    return written


def test_oblique_anisotropic_series_geometry(tmp_path: Path) -> None:
    written = _write_oblique_series(tmp_path / "series")
    vol = load_dicom_series(tmp_path / "series")
    assert vol.dimensions == (128, 128, 6)
    assert np.allclose(vol.spacing, (0.9, 0.7, 2.5), atol=1e-4)  # i: column spacing, j: row spacing
    for k, ds in enumerate(written):  # slices ordered along the normal, whatever the file order
        for col, row in [(0, 0), (100, 3), (5, 120)]:
            got = vol.ijk_to_ras_point(np.array([col, row, k], dtype=float))
            assert np.allclose(got, _expected_ras(ds, col, row), atol=1e-3)
        assert vol.data[k, k, 5] == pytest.approx(1000 + k + float(ds.RescaleIntercept))
    # the pydicom path agrees with SimpleITK's
    ref = volume_from_datasets([pydicom.dcmread(p) for p in sorted((tmp_path / "series").iterdir())], "ref")
    assert np.allclose(ref.ijk_to_ras, vol.ijk_to_ras, atol=1e-4)
    assert np.array_equal(ref.data, vol.data)
