"""The model's measurement tools: `probe_value` at a RAS point and `region_stats` over a sphere, a box or a
segment, on a CT the test writes (a sphere of known HU in air-like background), read in HU and in ml."""

from __future__ import annotations

import locale
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from copilot.panel.studies import open_study, study_for

SPACING = (1.5, 1.5, 2.0)  # i, j, k in mm
CENTRE_IJK = (20.0, 22.0, 15.0)
RADIUS_MM = 12.0
LESION_HU, BACKGROUND_HU = 60, -800


def _write_ct(folder: Path) -> np.ndarray:
    """A 40×44×30 CT series (LPS axes, origin 0): a sphere of 60 ± 5 HU (seeded noise) in -800 HU, one file
    per slice; returns the array ([k, j, i]) as written."""
    rng = np.random.default_rng(7)
    k, j, i = np.meshgrid(np.arange(30), np.arange(44), np.arange(40), indexing="ij")
    d2 = sum(((axis - c) * s) ** 2 for axis, c, s in zip((i, j, k), CENTRE_IJK, SPACING, strict=True))
    data = np.full(k.shape, BACKGROUND_HU, dtype=np.int16)
    inside = d2 <= RADIUS_MM**2
    data[inside] = np.rint(LESION_HU + rng.normal(0, 5, int(inside.sum()))).astype(np.int16)
    folder.mkdir(parents=True)
    writer = sitk.ImageFileWriter()
    writer.KeepOriginalImageUIDOn()
    uid = "1.2.826.0.1.3680043.2.1125.77"
    for z in range(data.shape[0]):
        image = sitk.GetImageFromArray(data[z])
        image.SetSpacing(SPACING[:2])
        for key, value in {"0008|0060": "CT", "0008|103e": "chest", "0020|000e": uid, "0020|0011": "2",
                           "0020|000d": uid + ".1", "0020|0013": str(z + 1), "0020|0032": f"0\\0\\{SPACING[2] * z}",
                           "0020|0037": "1\\0\\0\\0\\1\\0", "0018|0050": str(SPACING[2]),
                           "0008|0018": f"{uid}.{z + 1}"}.items():  # fmt: skip
            image.SetMetaData(key, value)
        writer.SetFileName(str(folder / f"{z:03d}.dcm"))
        saved = locale.setlocale(locale.LC_ALL)
        try:
            writer.Execute(image)
        finally:
            locale.setlocale(locale.LC_ALL, saved)
    return data


@pytest.fixture(scope="module")
def ct(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("ct")
    data = _write_ct(root / "ct")
    session = open_study(study_for(str(root / "ct")), root / "trace")
    yield session, data
    session.close({"status": "test"})


def _centre_ras() -> list[float]:
    """LPS (x, y, z) of the sphere's centre voxel, as RAS."""
    x, y, z = (c * s for c, s in zip(CENTRE_IJK, SPACING, strict=True))
    return [-x, -y, z]


def test_region_stats_of_a_sphere_give_its_hu_and_volume(ct) -> None:  # type: ignore[no-untyped-def]
    session, data = ct
    before = session.snapshot()
    out = session.call("region_stats", {"shape": "sphere", "center_ras": _centre_ras(), "radius_mm": RADIUS_MM})
    assert out.ok, out.error
    r = out.result
    truth = data[data > BACKGROUND_HU]
    assert r["units"] == "HU" and abs(r["mean"] - LESION_HU) < 1.0
    assert r["mean"] == pytest.approx(truth.mean(), abs=1e-3)
    assert r["max"] == truth.max() and r["sd"] == pytest.approx(truth.std(ddof=1), abs=1e-3)
    sphere_ml = 4.0 / 3.0 * np.pi * RADIUS_MM**3 / 1000.0  # 7.238 ml
    assert abs(r["volume_ml"] - sphere_ml) / sphere_ml < 0.05
    assert session.snapshot()["views"] == before["views"]  # a measurement moves nothing


def test_a_box_and_a_point_read_the_same_voxels(ct) -> None:  # type: ignore[no-untyped-def]
    session, _ = ct
    box = session.call("region_stats", {"shape": "box", "center_ras": _centre_ras(), "size_mm": [6, 6, 4]}).result
    assert box["min"] > 30 and box["voxels"] == 5 * 5 * 3  # 6 mm / 1.5 mm + 1 voxel centres per side, 4 mm / 2 + 1
    probe = session.call("probe_value", {"ras": _centre_ras()}).result
    assert probe["units"] == "HU" and probe["ijk"] == [20, 22, 15] and abs(probe["value"] - LESION_HU) < 20
    corner = session.call("probe_value", {"ras": [-1.0, -1.0, 1.0]}).result
    assert corner["value"] == BACKGROUND_HU


def test_bad_regions_are_refused_by_name_and_change_nothing(ct) -> None:  # type: ignore[no-untyped-def]
    session, _ = ct
    before = session.snapshot()
    outside = session.call("probe_value", {"ras": [500.0, 500.0, 500.0]})
    assert not outside.ok and outside.error["code"] == "out_of_volume"
    missing = session.call("region_stats", {"shape": "sphere", "center_ras": _centre_ras()})
    assert not missing.ok and missing.error["code"] == "invalid_arguments"
    empty = session.call("region_stats", {"shape": "sphere", "center_ras": [900.0, 0, 0], "radius_mm": 5})
    assert not empty.ok and empty.error["code"] == "empty_region"
    huge = session.call("region_stats", {"shape": "sphere", "center_ras": _centre_ras(), "radius_mm": 5000})
    assert not huge.ok and huge.status == 422
    assert session.snapshot() == before


def test_the_tools_are_offered_in_the_harness_track_a_not_in_the_paper_protocol() -> None:
    from copilot.tools import RADIOLOGY
    from copilot.tools.protocols import PAPER_RADIOLOGY_TOOLS

    names = {s.name for s in RADIOLOGY.specs("A")}
    assert {"probe_value", "region_stats"} <= names
    assert not {"probe_value", "region_stats"} & set(PAPER_RADIOLOGY_TOOLS)
