"""Images a clinician can trust, on the test files that ship with pydicom and nibabel and on series built from
them: slices only where they were acquired, invalid geometry refused by name, real-world values, 4D frames."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import nibabel as nib
import nibabel.testing
import numpy as np
import pydicom
import pytest
from pydicom.data import get_testdata_file, get_testdata_files

from copilot.engine.volume.display import default_display, to_uint8
from copilot.engine.volume.image import LPS_TO_RAS, VolumeLoadError
from copilot.engine.volume.loading import load_volume


def _refused(path: Path, code: str, **kwargs: object) -> str:
    with pytest.raises(VolumeLoadError) as info:
        load_volume(path, **kwargs)  # type: ignore[arg-type]
    assert info.value.code == code, str(info.value)
    return str(info.value)


def _rotation(deg_x: float, deg_y: float) -> np.ndarray:
    ax, ay = np.radians(deg_x), np.radians(deg_y)
    rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
    ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
    return ry @ rx


def write_series(
    folder: Path,
    positions: list[np.ndarray] | np.ndarray,
    iop: np.ndarray | list[float] | None = None,
    pixels: np.ndarray | None = None,
    **tags: object,
) -> list[Path]:
    """A series made from pydicom's CT_small.dcm: one slice per position (LPS mm), shared orientation."""
    folder.mkdir(parents=True, exist_ok=True)
    base = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    series_uid = pydicom.uid.generate_uid()
    cosines = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0] if iop is None else [float(v) for v in iop]
    out = []
    for n, pos in enumerate(positions):
        ds = base.copy()
        ds.SeriesInstanceUID = series_uid
        ds.SOPInstanceUID = pydicom.uid.generate_uid()
        ds.InstanceNumber = n + 1
        ds.ImagePositionPatient = [f"{float(v):.6f}" for v in pos]
        ds.ImageOrientationPatient = [f"{v:.8f}" for v in cosines]
        if pixels is not None:
            ds.PixelData = pixels.astype(np.int16).tobytes()
        for key, value in tags.items():
            if value is None:
                if key in ds:
                    delattr(ds, key)
            else:
                setattr(ds, key, value)
        path = folder / f"s{n:03d}.dcm"
        ds.save_as(path)
        out.append(path)
    return out


def _oblique(n: int, step: float = 2.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IOP, normal and positions of a regular oblique series (20° about x, 10° about y)."""
    rot = _rotation(20.0, 10.0)
    row, col = rot[:, 0], rot[:, 1]
    normal = np.cross(row, col)
    origin = np.array([-120.5, -97.25, 33.0])
    return np.concatenate([row, col]), normal, np.array([origin + k * step * normal for k in range(n)])


def _slice_positions_ras(vol) -> np.ndarray:  # type: ignore[no-untyped-def]
    k = np.arange(vol.dimensions[2], dtype=float)
    ijk = np.stack([np.zeros_like(k), np.zeros_like(k), k, np.ones_like(k)])
    return (vol.ijk_to_ras @ ijk)[:3].T


# ----- slice positions are facts -----


def test_ct2_gap_series_is_refused_with_its_positions(tmp_path: Path) -> None:
    """pydicom's dicomdirtests CT2: four slices at S = -99.48, 103.02, 104.27, 105.52 mm (a 202.5 mm gap)."""
    folder = tmp_path / "CT2"
    folder.mkdir()
    for f in get_testdata_files("dicomdirtests/77654033/CT2/*"):
        shutil.copy(f, folder)
    message = _refused(folder, "irregular_slice_spacing")
    for s in ("-99.48", "103.02", "104.27", "105.52"):
        assert s in message


def test_ct2_regular_part_loads_at_its_true_positions(tmp_path: Path) -> None:
    """The three evenly spaced CT2 slices load, each slice's RAS S within 0.01 mm of its ImagePositionPatient."""
    folder = tmp_path / "CT2"
    folder.mkdir()
    kept = []
    for f in get_testdata_files("dicomdirtests/77654033/CT2/*"):
        ds = pydicom.dcmread(f)
        if float(ds.ImagePositionPatient[2]) > 0:
            shutil.copy(f, folder)
            kept.append(float(ds.ImagePositionPatient[2]))
    vol = load_volume(folder)
    s = sorted(_slice_positions_ras(vol)[:, 2])
    assert np.abs(np.array(s) - sorted(kept)).max() < 0.01


def test_regular_oblique_series_places_every_slice_at_its_position(tmp_path: Path) -> None:
    iop, _, positions = _oblique(8)
    write_series(tmp_path / "obl", positions, iop)
    vol = load_volume(tmp_path / "obl")
    placed = _slice_positions_ras(vol)
    expected = (LPS_TO_RAS @ positions.T).T
    assert np.abs(placed - expected).max() < 0.01  # R, A and S of every slice


def test_dropped_slice_oblique_series_is_refused(tmp_path: Path) -> None:
    iop, _, positions = _oblique(8)
    write_series(tmp_path / "obl", np.delete(positions, 3, axis=0), iop)
    message = _refused(tmp_path / "obl", "irregular_slice_spacing")
    assert "2.50" in message and "5.00" in message  # the slice gaps


def test_duplicate_positions_are_refused(tmp_path: Path) -> None:
    positions = [np.array([0.0, 0.0, z]) for z in (0.0, 2.5, 2.5, 5.0)]
    write_series(tmp_path / "dup", positions)
    _refused(tmp_path / "dup", "inconsistent_series")
    write_series(tmp_path / "one", [np.zeros(3)] * 4)
    assert "share one position" in _refused(tmp_path / "one", "inconsistent_series")


def test_variable_thickness_is_refused(tmp_path: Path) -> None:
    """2.5 mm sections then 5 mm sections in one series."""
    zs = [0.0, 2.5, 5.0, 7.5, 12.5, 17.5]
    paths = write_series(tmp_path / "var", [np.array([0.0, 0.0, z]) for z in zs])
    for p, t in zip(paths, (2.5, 2.5, 2.5, 5, 5, 5), strict=True):
        ds = pydicom.dcmread(p)
        ds.SliceThickness = t
        ds.save_as(p)
    _refused(tmp_path / "var", "irregular_slice_spacing")


def test_gantry_tilt_is_refused(tmp_path: Path) -> None:
    """Axial images whose positions also move along y: a 15° gantry tilt."""
    positions = [np.array([0.0, z * np.tan(np.radians(15.0)), z]) for z in np.arange(6) * 2.5]
    message = _refused_series(tmp_path / "tilt", positions)
    assert "15.0°" in message


def _refused_series(folder: Path, positions: list[np.ndarray]) -> str:
    write_series(folder, positions)
    return _refused(folder, "gantry_tilt")


def test_mixed_orientations_are_refused(tmp_path: Path) -> None:
    paths = write_series(tmp_path / "mix", [np.array([0.0, 0.0, z]) for z in (0.0, 2.5, 5.0)])
    ds = pydicom.dcmread(paths[1])
    ds.ImageOrientationPatient = [1, 0, 0, 0, 0, -1]
    ds.save_as(paths[1])
    _refused(tmp_path / "mix", "inconsistent_series")


def _enhanced(tmp_path: Path, zs: list[float]) -> Path:
    """A legacy-converted enhanced CT (per-frame positions) made by highdicom from CT_small slices."""
    import highdicom as hd

    paths = write_series(tmp_path / f"src{len(zs)}", [np.array([0.0, 0.0, z]) for z in zs])
    mf = hd.legacy.LegacyConvertedEnhancedCTImage(
        [pydicom.dcmread(p) for p in paths], pydicom.uid.generate_uid(), 1, pydicom.uid.generate_uid(), 1
    )
    out = tmp_path / f"enhanced{len(zs)}.dcm"
    mf.save_as(out)
    return out


def test_multiframe_per_frame_positions_are_checked(tmp_path: Path) -> None:
    regular = _enhanced(tmp_path, [0.0, 2.0, 4.0, 6.0])
    vol = load_volume(regular)
    assert vol.dimensions[2] == 4
    assert np.abs(np.sort(_slice_positions_ras(vol)[:, 2]) - [0.0, 2.0, 4.0, 6.0]).max() < 0.01
    gap = _enhanced(tmp_path, [0.0, 2.0, 4.0, 10.0, 12.0])
    _refused(gap, "irregular_slice_spacing")


@pytest.mark.parametrize(
    ("tag", "value"),
    [
        ("PixelSpacing", ["0", "0"]),
        ("PixelSpacing", ["-1", "0.5"]),
        ("PixelSpacing", ["nan", "0.5"]),
        ("ImageOrientationPatient", [0, 0, 0, 0, 0, 0]),
        ("ImageOrientationPatient", [1, 0, 0, 1, 0, 0]),
        ("ImageOrientationPatient", ["nan", 0, 0, 0, 1, 0]),
        ("ImagePositionPatient", ["inf", 0, 0]),
    ],
)
@pytest.mark.filterwarnings("ignore:Invalid value for VR DS")
def test_invalid_dicom_geometry_is_refused_not_defaulted(tmp_path: Path, tag: str, value: list[object]) -> None:
    paths = write_series(tmp_path / "bad", [np.array([0.0, 0.0, z]) for z in (0.0, 2.5, 5.0)])
    for p in paths:
        ds = pydicom.dcmread(p)
        setattr(ds, tag, value)
        ds.save_as(p)
    _refused(tmp_path / "bad", "invalid_geometry")
    _refused(paths[0], "invalid_geometry")


def _nifti(tmp_path: Path, name: str) -> tuple[Path, bytearray]:
    img = nib.Nifti1Image(np.arange(24, dtype=np.int16).reshape(2, 3, 4), np.diag([2.0, 2.0, 2.0, 1.0]))
    path = tmp_path / name
    nib.save(img, path)
    return path, bytearray(path.read_bytes())


@pytest.mark.parametrize(
    ("edits", "code"),
    [
        ({80: ("<f", 0.0)}, "invalid_geometry"),  # pixdim[1] = 0
        ({84: ("<f", -1.0)}, "invalid_geometry"),  # pixdim[2] < 0
        ({252: ("<h", 1), 254: ("<h", 0), 256: ("<f", float("nan"))}, "invalid_geometry"),  # NaN qform
        ({254: ("<h", 2), 280: ("<f", float("nan"))}, "invalid_geometry"),  # NaN sform
        ({254: ("<h", 2), 280: ("<f", 0.0), 284: ("<f", 0.0), 288: ("<f", 0.0)}, "invalid_geometry"),  # sform rank 2
        ({108: ("<f", 10_000.0)}, "truncated_image"),  # vox_offset past the end of the file
    ],
)
def test_invalid_nifti_geometry_is_refused(tmp_path: Path, edits: dict[int, tuple[str, float]], code: str) -> None:
    path, raw = _nifti(tmp_path, "bad.nii")
    for offset, (fmt, value) in edits.items():
        raw[offset : offset + struct.calcsize(fmt)] = struct.pack(fmt, value)
    path.write_bytes(bytes(raw))
    _refused(path, code)


# ----- real-world values -----


def test_rt_dose_is_pixel_times_dose_grid_scaling() -> None:
    path = get_testdata_file("rtdose.dcm")
    ds = pydicom.dcmread(path)
    vol = load_volume(path)
    assert vol.modality == "RTDOSE"
    expected = ds.pixel_array.astype(np.float64) * float(ds.DoseGridScaling)
    # frame k of the file is slice k along the normal (GridFrameOffsetVector increases)
    assert np.allclose(vol.data, expected, rtol=1e-6)
    assert vol.metadata["units"] == "relative" and vol.metadata["DoseGridScaling"].startswith("1.0")
    offsets = [float(v) for v in ds.GridFrameOffsetVector]
    s = _slice_positions_ras(vol)[:, 2]
    assert np.abs(s - (float(ds.ImagePositionPatient[2]) + np.array(offsets))).max() < 0.01


def test_rt_dose_in_gray_reports_gy(tmp_path: Path) -> None:
    ds = pydicom.dcmread(get_testdata_file("rtdose.dcm"))
    ds.DoseUnits = "GY"
    ds.DoseGridScaling = "2.5e-5"
    ds.save_as(tmp_path / "dose.dcm")
    vol = load_volume(tmp_path / "dose.dcm")
    assert vol.metadata["units"] == "Gy"
    assert np.isclose(vol.value_range[1], ds.pixel_array.max() * 2.5e-5, rtol=1e-6)


def test_rescale_slope_and_intercept_are_applied(tmp_path: Path) -> None:
    pixels = np.full((128, 128), 100, dtype=np.int16)
    write_series(
        tmp_path / "r",
        [np.array([0.0, 0.0, z]) for z in (0.0, 5.0)],
        pixels=pixels,
        RescaleSlope="2",
        RescaleIntercept="-1024",
    )
    vol = load_volume(tmp_path / "r")
    assert np.allclose(vol.data, 2 * 100 - 1024)
    assert vol.metadata["units"] == "HU"


def test_pet_suv_inputs_are_kept(tmp_path: Path) -> None:
    info = pydicom.Dataset()
    info.RadionuclideTotalDose = "370000000"
    info.RadionuclideHalfLife = "6586.2"
    info.RadiopharmaceuticalStartTime = "101500"
    write_series(
        tmp_path / "pet",
        [np.array([0.0, 0.0, z]) for z in (0.0, 4.0)],
        Modality="PT",
        Units="BQML",
        DecayCorrection="START",
        PatientWeight="72.5",
        SeriesTime="104500",
        RadiopharmaceuticalInformationSequence=pydicom.Sequence([info]),
    )
    meta = load_volume(tmp_path / "pet").metadata
    assert meta["units"] == "BQML" and meta["DecayCorrection"] == "START" and meta["PatientWeight"] == "72.5"
    assert meta["RadionuclideTotalDose"] == "370000000" and meta["RadionuclideHalfLife"] == "6586.2"
    assert meta["RadiopharmaceuticalStartTime"] == "101500"


def test_siemens_mosaic_is_refused_by_name(tmp_path: Path) -> None:
    ds = pydicom.dcmread(get_testdata_file("MR_small.dcm"))
    ds.ImageType = ["ORIGINAL", "PRIMARY", "M", "ND", "MOSAIC"]
    ds.add_new((0x0019, 0x0010), "LO", "SIEMENS MR HEADER")
    ds.add_new((0x0019, 0x100A), "US", 16)
    ds.save_as(tmp_path / "mosaic.dcm")
    assert "mosaic" in _refused(tmp_path / "mosaic.dcm", "mosaic_image")
    folder = tmp_path / "series"
    folder.mkdir()
    ds.save_as(folder / "m.dcm")
    _refused(folder, "mosaic_image")


def test_4d_nifti_opens_one_frame_at_a_time() -> None:
    path = os.path.join(nibabel.testing.data_path, "example4d.nii.gz")
    data = np.asarray(nib.load(path).dataobj)
    first, second = load_volume(path), load_volume(path, frame=1)
    assert first.metadata["frame"] == "0" and second.metadata["frames"] == "2"
    assert np.allclose(second.data, data[..., 1].T) and np.allclose(first.data, data[..., 0].T)
    assert np.array_equal(first.ijk_to_ras, second.ijk_to_ras)
    _refused(Path(path), "not_found", frame=2)


def test_4d_frame_is_in_the_scene_state() -> None:
    from copilot.engine.volume.viewer import EmbeddedVolumeViewer

    viewer = EmbeddedVolumeViewer()
    viewer.add_volume(load_volume(os.path.join(nibabel.testing.data_path, "example4d.nii.gz"), frame=1))
    entry = viewer.inventory()[0]
    assert entry["frame"] == 1 and entry["frames"] == 2


def test_two_valued_ct_opens_with_both_values_visible(tmp_path: Path) -> None:
    """Air (-900 HU) with a soft block (300 HU), no window in the file: the block and the air both show."""
    pixels = np.full((128, 128), -900, dtype=np.int16)
    pixels[40:80, 40:80] = 300
    write_series(
        tmp_path / "two",
        [np.array([0.0, 0.0, z]) for z in (0.0, 5.0, 10.0)],
        pixels=pixels,
        RescaleSlope="1",
        RescaleIntercept="0",
        WindowCenter=None,
        WindowWidth=None,
    )
    vol = load_volume(tmp_path / "two")
    d = default_display(vol)
    grey = to_uint8(np.array([-900.0, 300.0], dtype=np.float32), d.window, d.level)
    assert d.window >= 100 and int(grey[1]) - int(grey[0]) >= 200


def test_file_window_is_the_first_display(tmp_path: Path) -> None:
    write_series(tmp_path / "w", [np.array([0.0, 0.0, z]) for z in (0.0, 5.0)], WindowCenter="40", WindowWidth="400")
    d = default_display(load_volume(tmp_path / "w"))
    assert (d.window, d.level) == (400.0, 40.0)


def test_multiframe_fallback_keeps_per_frame_positions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where GDCM cannot read a multi-frame file, pydicom builds it from the per-frame positions."""
    import copilot.engine.volume.dicom as dicom_module

    path = _enhanced(tmp_path, [0.0, 2.0, 4.0, 6.0])
    direct = load_volume(path)

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("GDCM cannot read this file")

    monkeypatch.setattr(dicom_module.sitk, "ReadImage", fail)
    vol = load_volume(path)
    s_fallback, s_direct = _slice_positions_ras(vol)[:, 2], _slice_positions_ras(direct)[:, 2]
    assert np.abs(np.sort(s_fallback) - [0.0, 2.0, 4.0, 6.0]).max() < 0.01
    for k, s in enumerate(s_fallback):  # the same pixels (rescaled from the functional groups) at each position
        assert np.array_equal(vol.data[k], direct.data[int(np.argmin(np.abs(s_direct - s)))])
    assert vol.value_range == direct.value_range


def test_positions_rounded_in_the_header_stay_within_tolerance(tmp_path: Path) -> None:
    """0.625 mm slices written with two decimals (0.63, 1.25, 1.88 …) are one regular volume; a 0.1 mm slip
    (16 % of the step) is not."""
    zs = [round(k * 0.625, 2) for k in range(8)]
    write_series(tmp_path / "rounded", [np.array([0.0, 0.0, z]) for z in zs])
    vol = load_volume(tmp_path / "rounded")
    assert vol.spacing[2] == pytest.approx(0.625, abs=1e-3)
    zs[4] += 0.1
    write_series(tmp_path / "slipped", [np.array([0.0, 0.0, z]) for z in zs])
    _refused(tmp_path / "slipped", "irregular_slice_spacing")
