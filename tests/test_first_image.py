"""The study's first image, read before the viewer loads: the middle slice of a NIfTI file or a DICOM series and a
slide's lowest level, turned as the viewer's views show them, with nothing but numpy and the file's bytes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pydicom
import SimpleITK as sitk
import tifffile

from copilot.cases.dicom_study import write_series
from copilot.engine.dicom_header import read_header
from copilot.engine.first_image import first_image
from tests.workstation_data import dicom_two_series

ROOT = Path(__file__).resolve().parent.parent


def _marked(direction: tuple[float, ...] = (1, 0, 0, 0, 1, 0, 0, 0, 1)) -> sitk.Image:
    """A 40×30×9 volume (1 × 2 × 3 mm) with a bright block in the patient's left-anterior quadrant, its middle
    slice (k = 4) only, stored along `direction` (LPS)."""
    image = sitk.Image([40, 30, 9], sitk.sitkInt16)
    image.SetSpacing((1.0, 2.0, 3.0))
    image.SetDirection(direction)
    for i in range(40):
        for j in range(30):
            ras = np.array(image.TransformIndexToPhysicalPoint((i, j, 4))) * [-1, -1, 1]
            centre = np.array(image.TransformContinuousIndexToPhysicalPoint((19.5, 14.5, 4))) * [-1, -1, 1]
            left, anterior = ras[0] < centre[0] - 8, ras[1] > centre[1] + 10
            image[i, j, 4] = 1000 if left and anterior else 100
    return image


def _bright_quadrant(pixels: np.ndarray) -> tuple[str, str]:
    """Where the bright block shows: (top|bottom, left|right) of the screen."""
    rows, cols = np.nonzero(pixels > 200)
    vertical = "top" if rows.mean() < pixels.shape[0] / 2 else "bottom"
    return vertical, "left" if cols.mean() < pixels.shape[1] / 2 else "right"


def test_a_nifti_middle_slice_shows_as_the_axial_view_whatever_the_storage_order(tmp_path: Path) -> None:
    storage = [(1, 0, 0, 0, 1, 0, 0, 0, 1), (-1, 0, 0, 0, -1, 0, 0, 0, 1), (0, 1, 0, 1, 0, 0, 0, 0, -1)]
    for n, direction in enumerate(storage):
        for suffix in (".nii", ".nii.gz"):
            path = tmp_path / f"v{n}{suffix}"
            sitk.WriteImage(_marked(tuple(float(v) for v in direction)), str(path))
            found = first_image(path)
            assert found is not None and found.pixels.dtype == np.uint8
            assert _bright_quadrant(found.pixels) == ("top", "right")  # anterior up, patient's left on the right
            assert found.caption.endswith("slice 5 of 9")
    transposed = first_image(tmp_path / "v2.nii.gz")
    assert transposed is not None and transposed.pixels.shape == (40, 30) and transposed.pixel_aspect == 0.5  # i down


def test_a_dicom_series_shows_its_middle_slice_by_position_not_by_file_name(tmp_path: Path) -> None:
    folder = tmp_path / "series"
    write_series(_marked(), folder, 3, "T1 axial", "1.2.826.0.1.3680043.2.1125.9")
    names = sorted(folder.iterdir())
    for f, target in zip(names, reversed(names), strict=True):  # file names no longer follow the slices
        f.rename(f.with_name("x" + target.name))
    found = first_image(folder)
    assert found is not None and found.caption == "series: slice 5 of 9"
    assert _bright_quadrant(found.pixels) == ("top", "right") and found.pixels.shape == (30, 40)
    assert found.pixel_aspect == 2.0


def test_the_header_reader_agrees_with_pydicom_through_sequences(tmp_path: Path) -> None:
    volume = sitk.Cast(sitk.RescaleIntensity(sitk.Cast(_marked(), sitk.sitkFloat32), 0, 30), sitk.sitkFloat32)
    write_series(volume, tmp_path / "pet", 4, "PET AC", "1.2.826.0.1.3680043.2.1125.9")  # a nested sequence
    path = sorted((tmp_path / "pet").iterdir())[4]
    ours, theirs = read_header(path), pydicom.dcmread(path)
    assert ours is not None and ours.series_uid == theirs.SeriesInstanceUID
    assert np.allclose(ours.position, [float(v) for v in theirs.ImagePositionPatient])
    assert ours.spacing == tuple(float(v) for v in theirs.PixelSpacing)
    pixels = ours.pixels()
    assert pixels is not None
    expected = theirs.pixel_array * float(theirs.RescaleSlope) + float(theirs.RescaleIntercept)
    assert np.allclose(pixels, expected, rtol=1e-6)


def test_what_the_viewer_must_read_itself_gives_no_first_image(tmp_path: Path) -> None:
    assert first_image(dicom_two_series(tmp_path)) is None  # several series: the clinician chooses
    folder = tmp_path / "one"
    write_series(_marked(), folder, 3, "T1 axial", "1.2.826.0.1.3680043.2.1125.9")
    for f in folder.iterdir():  # compressed: left to the full reader
        ds = pydicom.dcmread(f)
        ds.compress(pydicom.uid.RLELossless)
        ds.save_as(f)
    assert first_image(folder) is None
    (tmp_path / "broken.nii.gz").write_bytes(b"\x1f\x8b not gzip")
    assert first_image(tmp_path / "broken.nii.gz") is None
    assert first_image(tmp_path / "missing.nii") is None


def test_a_slide_shows_its_lowest_level(tmp_path: Path) -> None:
    path = tmp_path / "slide.tif"
    base = np.zeros((1024, 1536, 3), np.uint8)
    base[:, 768:] = (200, 40, 120)
    with tifffile.TiffWriter(path) as tw:
        tw.write(base, tile=(256, 256), photometric="rgb", metadata=None)
        tw.write(base[::4, ::4], tile=(256, 256), photometric="rgb", subfiletype=1, metadata=None)
        tw.write(base[::16, ::16], tile=(64, 64), photometric="rgb", subfiletype=1, metadata=None)
    found = first_image(path)
    assert found is not None and found.pixels.shape == (64, 96, 3)
    assert found.pixels[0, 0].tolist() == [0, 0, 0] and found.pixels[0, -1].tolist() == [200, 40, 120]
    assert found.caption == "slide.tif: 1536×1024 px"


def test_a_case_pack_shows_its_default_volume(tmp_path: Path) -> None:
    case = tmp_path / "case"
    (case / "images").mkdir(parents=True)
    sitk.WriteImage(_marked(), str(case / "images" / "T1.nii.gz"))
    shutil.copy(case / "images" / "T1.nii.gz", case / "images" / "FLAIR.nii.gz")
    (case / "case.json").write_text('{"inputs": {"volumes": ["images/T1.nii.gz", "images/FLAIR.nii.gz"], '
                                    '"default_volume": "FLAIR"}}')  # fmt: skip
    found = first_image(case)
    assert found is not None and found.caption == "FLAIR.nii.gz: slice 5 of 9"
    shutil.copytree(case, tmp_path / "a_case")  # a folder of case packs: its first
    (tmp_path / "a_case" / "images" / "FLAIR.nii.gz").unlink()
    (tmp_path / "a_case" / "case.json").write_text('{"inputs": {"volumes": ["images/T1.nii.gz"]}}')
    first = first_image(tmp_path)
    assert first is not None and first.caption == "T1.nii.gz: slice 5 of 9"


def test_reading_the_first_image_loads_no_viewer_module(tmp_path: Path) -> None:
    path = tmp_path / "v.nii.gz"
    sitk.WriteImage(_marked(), str(path))
    code = (
        "import sys\nfrom copilot.engine.first_image import first_image\n"
        f"assert first_image({str(path)!r}) is not None\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'SimpleITK', 'pydicom', 'PySide6', 'vtk', 'torch',"
        " 'scipy', 'PIL', 'tifffile', 'nibabel'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.strip()  # fmt: skip
    assert out == "[]"
