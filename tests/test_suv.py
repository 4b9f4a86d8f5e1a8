"""SUV of eight differently tagged PET series, each written as real DICOM slices and opened by the loader,
against the vendor-neutral QIBA rule worked by hand here (F-18, T½ = 6586.2 s, 370 MBq injected unless said).

Decayed dose D(Δt) = 370e6 · 2^(−Δt / 6586.2); SUVbw = C (Bq/ml) · W (g) / D.
1. plain: injected 10:00, series 11:00 = first acquisition: Δt 3600 s, D = 253.31 MBq;
   C 10000, W 70 kg → 10000 · 70000 / 253.31e6 = 2.7634.
2. reprocessed: injected 09:15, acquired 10:15–10:19, SeriesTime 14:30: the reference is the earliest acquisition,
   Δt 3600 s → 30000 · 70000 / 253.31e6 = 8.2901 (decaying to the series time, Δt 18900 s, would give 41.48).
3. midnight: injected 23:30 (StartTime only), series and acquisitions 00:20 the next day: Δt 3000 s,
   D = 269.83 MBq → 8000 · 70000 / 269.83e6 = 2.0754.
4. ADMIN: decay-corrected to the injection, D = 370 MBq → 5000 · 70000 / 370e6 = 0.9459.
5. CNTS with the Philips SUV scale factor (7053,1000) 0.000435: 2000 counts · 0.000435 = 0.8700.
6. no PatientWeight: refused, the stored value shown with the reason.
7. male, 80 kg, 1.80 m, C 20000, Δt 3600: SUVbw = 20000 · 80000 / 253.31e6 = 6.3163;
   BMI 24.691, LBM (Janmahasatian) 9270 · 80 / (6680 + 216 · 24.691) = 61.731 kg → SUVlbm = 6.3163 · 61.731 / 80
   = 4.8739; BSA (DuBois) 0.007184 · 80^0.425 · 180^0.725 = 1.99642 m² → SUVbsa = 6.3163 · 19964.2 / 80000 = 1.5762.
8. female, 60 kg, 1.65 m, C 20000, injected 09:30 by RadiopharmaceuticalStartDateTime, series 11:00: Δt 5400 s,
   D = 209.60 MBq → SUVbw = 20000 · 60000 / 209.60e6 = 5.7252; BMI 22.039, LBM 9270 · 60 / (8780 + 244 · 22.039)
   = 39.287 kg → SUVlbm 3.7488; BSA 0.007184 · 60^0.425 · 165^0.725 = 1.65866 m² → SUVbsa 1.5827.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import UID, ExplicitVRLittleEndian, generate_uid

from copilot.engine.volume.loading import load_volume
from copilot.engine.volume.suv import earliest_acquisition, suv, volume_suv
from copilot.panel.probe import value_text, voxel_value

HALF_LIFE = 6586.2  # s, F-18


def decayed(seconds: float, dose: float = 370e6) -> float:
    """The injected dose left after `seconds` (the rule's decay, by hand)."""
    return dose * 2.0 ** (-seconds / HALF_LIFE)


def write_pet(folder: Path, value: float, times: list[str], *, start: str = "100000", slope: float = 1.0,
              dates: list[str] | None = None, **tags: object) -> Path:  # fmt: skip
    """Three axial PET slices (one file each, in reverse time order) with `value` (real-world) at voxel
    (4, 4, 1), the background a tenth of it, and the given acquisition times/dates and tags."""
    folder.mkdir(parents=True)
    series = generate_uid()
    for k in reversed(range(3)):
        ds = Dataset()
        ds.file_meta = FileMetaDataset()
        ds.SOPClassUID, ds.SOPInstanceUID = UID("1.2.840.10008.5.1.4.1.1.128"), generate_uid()
        ds.file_meta.MediaStorageSOPClassUID = ds.SOPClassUID
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds.Modality, ds.SeriesInstanceUID, ds.StudyInstanceUID = "PT", series, "1.2.826.0.1.3680043.2.1125.901"
        ds.SeriesDescription, ds.InstanceNumber = "PET", k + 1
        ds.SeriesDate, ds.SeriesTime = "20240102", "110000"
        ds.AcquisitionTime = times[k]
        if dates:
            ds.AcquisitionDate = dates[k]
        ds.ImagePositionPatient, ds.ImageOrientationPatient = [0, 0, 4.0 * k], [1, 0, 0, 0, 1, 0]
        ds.PixelSpacing, ds.SliceThickness = [4, 4], 4
        ds.Rows = ds.Columns = 8
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 0
        ds.RescaleSlope, ds.RescaleIntercept = slope, 0
        stored = np.full((8, 8), round(value / 10 / slope), dtype=np.uint16)
        if k == 1:
            stored[4, 4] = round(value / slope)
        ds.PixelData = stored.tobytes()
        drug = Dataset()
        drug.RadionuclideTotalDose, drug.RadionuclideHalfLife = 370e6, HALF_LIFE
        drug.RadiopharmaceuticalStartTime = start
        ds.RadiopharmaceuticalInformationSequence = [drug]
        ds.Units, ds.DecayCorrection, ds.CorrectedImage, ds.PatientWeight = "BQML", "START", ["ATTN", "DECY"], 70
        for key, item in tags.items():
            if item is None:
                delattr(ds, key)
            elif key == "StartDateTime":
                drug.RadiopharmaceuticalStartDateTime = item
            elif key == "PhilipsSUV":
                ds.private_block(0x7053, "Philips PET Private Group", create=True).add_new(0x00, "DS", item)
            else:
                setattr(ds, key, item)
        ds.save_as(folder / f"slice{k}.dcm", enforce_file_format=True)
    return folder


def _opened(folder: Path) -> tuple[float, str]:
    """The stored value at the hot voxel and what the status bar says about it."""
    pet = load_volume(folder)
    value = voxel_value(pet, pet.ijk_to_ras_point(np.array([4, 4, 1])))
    assert value is not None
    return value, value_text(pet, value)


def test_plain_series_decays_to_the_series_time(tmp_path: Path) -> None:
    value, text = _opened(write_pet(tmp_path / "p", 10000, ["110000", "110200", "110400"]))
    by_hand = 10000 * 70000 / decayed(3600)
    assert decayed(3600) == pytest.approx(253.314e6, rel=1e-5) and by_hand == pytest.approx(2.7634, abs=1e-4)
    assert value == 10000 and text == "SUVbw 2.76 (10000 Bq/ml)"


def test_reprocessed_series_decays_to_its_earliest_acquisition(tmp_path: Path) -> None:
    folder = write_pet(tmp_path / "r", 30000, ["101700", "101500", "101900"], start="091500", SeriesTime="143000")
    pet = load_volume(folder)
    assert pet.metadata["AcquisitionTime"] == "101500"  # the earliest slice, though written second
    by_hand = 30000 * 70000 / decayed(3600)
    assert by_hand == pytest.approx(8.2901, abs=1e-4)
    assert 30000 * 70000 / decayed(18900) == pytest.approx(41.48, abs=0.01)  # what the series time would give
    found = volume_suv(pet)
    assert found.bw is not None and found.bw * 30000 == pytest.approx(by_hand, rel=1e-9)
    assert found.reference == "earliest acquisition 10:15:00 (series time 14:30:00 is later)"
    assert value_text(pet, 30000.0) == "SUVbw 8.29 (30000 Bq/ml)"


def test_injection_before_midnight_and_scan_after(tmp_path: Path) -> None:
    folder = write_pet(tmp_path / "m", 8000, ["002000", "002200", "002400"], start="233000",
                       dates=["20240103"] * 3, SeriesDate="20240103", SeriesTime="002000")  # fmt: skip
    by_hand = 8000 * 70000 / decayed(3000)
    assert decayed(3000) == pytest.approx(269.826e6, rel=1e-5) and by_hand == pytest.approx(2.0754, abs=1e-4)
    assert _opened(folder) == (8000, "SUVbw 2.08 (8000 Bq/ml)")
    # acquisitions spanning midnight without dates: the small hours are the next day, so 23:58 is the earliest
    assert earliest_acquisition([("", "000100"), ("", "235800"), ("", "235900")]) == ("", "235800")


def test_admin_decay_correction_takes_the_injected_dose(tmp_path: Path) -> None:
    folder = write_pet(tmp_path / "a", 5000, ["110000", "110200", "110400"], DecayCorrection="ADMIN")
    by_hand = 5000 * 70000 / 370e6
    assert by_hand == pytest.approx(0.9459, abs=1e-4)
    assert _opened(folder) == (5000, "SUVbw 0.95 (5000 Bq/ml)")


def test_philips_counts_use_the_private_suv_scale_factor(tmp_path: Path) -> None:
    folder = write_pet(tmp_path / "c", 2000, ["110000"] * 3, Units="CNTS", PhilipsSUV="0.000435")
    assert _opened(folder) == (2000, "SUVbw 0.87 (2000 counts)")  # 2000 · 0.000435 = 0.8700
    plain = write_pet(tmp_path / "c2", 2000, ["110000"] * 3, Units="CNTS")
    assert _opened(plain)[1] == "2000 counts (no SUV: units CNTS without the Philips SUV scale factor (7053,1000))"


def test_missing_weight_is_refused_with_the_reason(tmp_path: Path) -> None:
    folder = write_pet(tmp_path / "w", 10000, ["110000"] * 3, PatientWeight=None)
    assert _opened(folder) == (10000, "10000 Bq/ml (no SUV: no patient weight)")


def test_lean_body_mass_and_surface_area_for_a_man(tmp_path: Path) -> None:
    folder = write_pet(tmp_path / "lm", 20000, ["110000"] * 3, PatientWeight=80, PatientSize=1.80, PatientSex="M")
    bw = 20000 * 80000 / decayed(3600)
    lbm = 9270 * 80 / (6680 + 216 * 80 / 1.80**2)
    bsa = 0.007184 * 80**0.425 * 180**0.725
    assert (bw, lbm, bsa) == pytest.approx((6.3163, 61.731, 1.99642), abs=1e-3)
    assert (bw * lbm / 80, bw * bsa * 1e4 / 80000) == pytest.approx((4.8739, 1.5762), abs=1e-4)
    assert _opened(folder) == (20000, "SUVbw 6.32  SUVlbm 4.87  SUVbsa 1.58 (20000 Bq/ml)")


def test_lean_body_mass_and_surface_area_for_a_woman(tmp_path: Path) -> None:
    folder = write_pet(tmp_path / "lf", 20000, ["110000"] * 3, start="", StartDateTime="20240102093000",
                       PatientWeight=60, PatientSize=1.65, PatientSex="F")  # fmt: skip
    bw = 20000 * 60000 / decayed(5400)
    lbm = 9270 * 60 / (8780 + 244 * 60 / 1.65**2)
    bsa = 0.007184 * 60**0.425 * 165**0.725
    assert (bw, lbm, bsa) == pytest.approx((5.7252, 39.287, 1.65866), abs=1e-3)
    found = volume_suv(load_volume(folder))
    assert found.bw and found.lbm and found.bsa
    assert (found.bw * 20000, found.lbm * 20000, found.bsa * 20000) == pytest.approx(
        (bw, bw * lbm / 60, bw * bsa * 1e4 / 60000), rel=1e-9
    )
    assert _opened(folder)[1] == "SUVbw 5.73  SUVlbm 3.75  SUVbsa 1.58 (20000 Bq/ml)"


def test_refusals_name_their_reason() -> None:
    ds = Dataset()
    ds.Units, ds.PatientWeight, ds.DecayCorrection = "BQML", 70, "NONE"
    drug = Dataset()
    drug.RadionuclideTotalDose, drug.RadionuclideHalfLife, drug.RadiopharmaceuticalStartTime = 370e6, HALF_LIFE, "1000"
    ds.RadiopharmaceuticalInformationSequence, ds.SeriesTime = [drug], "110000"
    assert suv(ds).reason == "decay correction NONE (SUV needs START or ADMIN)"
    ds.DecayCorrection, ds.CorrectedImage = "START", ["ATTN"]
    assert suv(ds).reason == "CorrectedImage ATTN lacks ATTN or DECY"
    del ds.CorrectedImage
    assert suv(ds).bw == pytest.approx(70000 / decayed(3600))
    ds.Units = "PROPCNTS"
    assert suv(ds).reason == "units PROPCNTS (SUV needs BQML, GML or Philips CNTS)"
