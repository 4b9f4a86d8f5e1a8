"""Multi-frame DICOM (an enhanced CT written here from pydicom's CT_small, pydicom's shipped rtdose.dcm) opens
alike from the file, from a folder holding it and from the PACS cache layout: the same voxels, geometry and
value facts. Several multi-frame instances of one series are put together, or refused by name."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.data import get_testdata_file

from copilot.engine.volume.dicom_sources import source_frames
from copilot.engine.volume.image import Volume, VolumeLoadError
from copilot.engine.volume.loading import load_volume
from copilot.pacs.cache import PacsCache, write_origin
from tests.test_real_files import write_series

SERIES_UID = "1.2.826.0.1.3680043.2.1125.77.1"


def shipped(name: str) -> Path:
    """A file pydicom ships with its test data."""
    return Path(str(get_testdata_file(name)))


def enhanced_ct(folder: Path, zs: list[float], name: str = "enhanced.dcm", series: str = SERIES_UID) -> Path:
    """A legacy-converted enhanced CT (highdicom) of CT_small slices at the given z (LPS mm), each slice's pixels
    offset by its z so frames tell apart."""
    import highdicom as hd

    base = pydicom.dcmread(shipped("CT_small.dcm")).pixel_array.astype(np.int16)
    slices = folder / f"src_{name}"
    paths = []
    for z in zs:
        paths += write_series(slices / f"{z:g}", [np.array([0.0, 0.0, z])], pixels=base + int(z * 10))
    legacy = [pydicom.dcmread(p) for p in paths]
    for ds in legacy:
        ds.SeriesInstanceUID = series
    mf = hd.legacy.LegacyConvertedEnhancedCTImage(legacy, series, 1, pydicom.uid.generate_uid(), len(zs))
    out = folder / name
    mf.save_as(out)
    shutil.rmtree(slices)
    return out


def _same(a: Volume, b: Volume) -> None:
    assert a.data.shape == b.data.shape and np.array_equal(a.data, b.data)
    assert np.array_equal(a.ijk_to_ras, b.ijk_to_ras) and a.metadata == b.metadata and a.modality == b.modality


def _in_folder(file: Path, folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(file, folder / file.name)
    return folder


def _in_pacs_cache(file: Path, root: Path) -> Path:
    """The file where a retrieval from a PACS keeps it: SERVER/STUDY/SERIES/00001.dcm beside origin.json."""
    ds = pydicom.dcmread(file, stop_before_pixels=True)
    folder = PacsCache(root).series_dir("http://pacs.example/dicom-web", ds.StudyInstanceUID, ds.SeriesInstanceUID)
    folder.mkdir(parents=True)
    shutil.copy(file, folder / "00001.dcm")
    write_origin(folder, {"dicomweb": "http://pacs.example/dicom-web", "study": str(ds.StudyInstanceUID),
                          "series": str(ds.SeriesInstanceUID), "instances": 1, "complete": True})  # fmt: skip
    return folder


@pytest.mark.parametrize("kind", ["enhanced_ct", "rtdose"])
def test_file_folder_and_pacs_cache_open_alike(tmp_path: Path, kind: str) -> None:
    file = shipped("rtdose.dcm") if kind == "rtdose" else enhanced_ct(tmp_path, [0.0, 2.5, 5.0, 7.5])
    direct = load_volume(file)
    for folder in (_in_folder(file, tmp_path / "folder"), _in_pacs_cache(file, tmp_path / "cache")):
        from_folder = load_volume(folder)
        _same(from_folder, direct)
        assert from_folder.source == str(folder)
    if kind == "rtdose":  # 15 frames of 10 × 10 at 5 mm, DoseGridScaling applied
        assert direct.data.shape == (15, 10, 10) and direct.spacing[2] == pytest.approx(5.0)
        raw = pydicom.dcmread(file)
        assert direct.data.max() == pytest.approx(raw.pixel_array.max() * float(raw.DoseGridScaling), rel=1e-6)
    else:  # each slice where its frame was, its pixels offset by 10 × its z (highdicom stores frames by z)
        zs = [float((direct.ijk_to_ras @ np.array([0.0, 0.0, k, 1.0]))[2]) for k in range(4)]
        assert sorted(zs) == pytest.approx([0.0, 2.5, 5.0, 7.5]) and abs(direct.spacing[2]) == pytest.approx(2.5)
        means = direct.data.reshape(4, -1).mean(axis=1)
        assert np.allclose(means - 10 * np.array(zs), means[0] - 10 * zs[0])


def test_several_instances_of_one_series_are_put_together(tmp_path: Path) -> None:
    folder = tmp_path / "series"
    folder.mkdir()
    enhanced_ct(folder, [10.0, 12.5, 15.0], "b.dcm")  # the upper half first on disk
    enhanced_ct(folder, [0.0, 2.5, 5.0, 7.5], "a.dcm")
    whole = enhanced_ct(tmp_path, [0.0, 2.5, 5.0, 7.5, 10.0, 12.5, 15.0], "whole.dcm")
    together, reference = load_volume(folder), load_volume(whole)
    assert together.data.shape[0] == 7 and np.array_equal(together.data, reference.data)
    assert np.allclose(together.ijk_to_ras, reference.ijk_to_ras, atol=1e-9)
    frames = source_frames(together)
    assert frames is not None
    assert [(Path(f.dataset.filename).name, f.frame) for f in frames] == [  # slices from the top, as frames are
        ("b.dcm", 1), ("b.dcm", 2), ("b.dcm", 3), ("a.dcm", 1), ("a.dcm", 2), ("a.dcm", 3), ("a.dcm", 4)]  # fmt: skip


def test_instances_that_do_not_make_one_volume_are_refused_by_name(tmp_path: Path) -> None:
    overlap = tmp_path / "overlap"
    overlap.mkdir()
    enhanced_ct(overlap, [0.0, 2.5, 5.0], "a.dcm")
    enhanced_ct(overlap, [5.0, 7.5], "b.dcm")  # two acquisitions of the slice at 5 mm
    with pytest.raises(VolumeLoadError, match="share a position") as err:
        load_volume(overlap)
    assert err.value.code == "inconsistent_series"
    gap = tmp_path / "gap"
    gap.mkdir()
    enhanced_ct(gap, [0.0, 2.5], "a.dcm")
    enhanced_ct(gap, [10.0, 12.5], "b.dcm")
    with pytest.raises(VolumeLoadError) as err:
        load_volume(gap)
    assert err.value.code == "irregular_slice_spacing"
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    enhanced_ct(mixed, [0.0, 2.5], "a.dcm")
    single = write_series(tmp_path / "single", [np.array([0.0, 0.0, 5.0])])[0]
    ds = pydicom.dcmread(single)
    ds.SeriesInstanceUID = SERIES_UID
    ds.save_as(mixed / "c.dcm")
    with pytest.raises(VolumeLoadError, match="mixed with 1 single-frame") as err:
        load_volume(mixed)
    assert err.value.code == "inconsistent_series"


def _shuffled_frames(file: Path, order: list[int]) -> Path:
    """The multi-frame file with its frames (pixels and per-frame groups together) stored in another order."""
    ds = pydicom.dcmread(file)
    pixels = ds.pixel_array
    ds.PerFrameFunctionalGroupsSequence = [ds.PerFrameFunctionalGroupsSequence[n] for n in order]
    ds.PixelData = np.ascontiguousarray(pixels[order]).tobytes()
    out = file.with_name("shuffled.dcm")
    ds.save_as(out)
    return out


def _by_z(vol: Volume) -> np.ndarray:
    """The slices of a volume from the lowest z up."""
    zs = [(vol.ijk_to_ras @ np.array([0.0, 0.0, k, 1.0]))[2] for k in range(vol.data.shape[0])]
    return vol.data[np.argsort(zs)]


def test_slices_know_their_source_frame(tmp_path: Path) -> None:
    stored = enhanced_ct(tmp_path, [0.0, 2.5, 5.0, 7.5])  # frames at z 7.5, 5, 2.5, 0
    shuffled = _shuffled_frames(stored, [2, 0, 3, 1])  # frames at z 2.5, 7.5, 0, 5
    reference = load_volume(stored)
    for vol in (load_volume(shuffled), load_volume(_in_folder(shuffled, tmp_path / "f"))):
        assert np.array_equal(_by_z(vol), _by_z(reference))  # each frame where it was acquired
        frames = source_frames(vol)
        zs = [round(float((vol.ijk_to_ras @ np.array([0.0, 0.0, k, 1.0]))[2]), 3) for k in range(4)]
        at = {2.5: 1, 7.5: 2, 0.0: 3, 5.0: 4}  # the shuffled file's frame at each z
        assert frames is not None and [f.frame for f in frames] == [at[z] for z in zs]
    dose = source_frames(load_volume(shipped("rtdose.dcm")))
    assert dose is not None and [f.frame for f in dose] == list(range(1, 16))
