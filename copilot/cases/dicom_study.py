"""A case pack's volumes written as a DICOM study (one folder, one series per volume), as a scanner would send it:
CT in stored values with RescaleIntercept −1024 (Hounsfield units after rescale), PET in Bq/ml with the tags SUV
needs (body weight, injected dose, half-life, injection and series times), so that the study opens like a
clinician's own and its PET reads back in the SUV the case was made with.

Run `python -m copilot.cases.dicom_study CASE_DIR OUT_DIR`. The study carries no patient identifiers beyond
a fixed placeholder name and ID.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pydicom
import SimpleITK as sitk
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import UID, ExplicitVRLittleEndian, generate_uid

CT_STORAGE = UID("1.2.840.10008.5.1.4.1.1.2")
PET_STORAGE = UID("1.2.840.10008.5.1.4.1.1.128")
MR_STORAGE = UID("1.2.840.10008.5.1.4.1.1.4")
WEIGHT_KG = 72.0
DOSE_BQ = 350e6  # F-18 FDG at injection
HALF_LIFE_S = 6586.2
UPTAKE_S = 3600.0  # injection 09:00, series 10:00
STUDY_DATE = "20240315"


def decayed_dose() -> float:
    """The injected dose at the series time (Bq)."""
    return DOSE_BQ * 2.0 ** (-UPTAKE_S / HALF_LIFE_S)


def _modality(name: str) -> str:
    upper = name.upper()
    return "PT" if upper.startswith("PET") else "CT" if upper.startswith("CT") else "MR"


def _slice(study_uid: str, series_uid: str, modality: str, number: int, description: str, k: int) -> Dataset:
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    storage = {"PT": PET_STORAGE, "CT": CT_STORAGE}.get(modality, MR_STORAGE)
    ds.file_meta.MediaStorageSOPClassUID = storage
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.SOPClassUID, ds.SOPInstanceUID = storage, ds.file_meta.MediaStorageSOPInstanceUID
    ds.PatientName, ds.PatientID = "ANONYMOUS", "ANON"
    ds.StudyInstanceUID, ds.SeriesInstanceUID = study_uid, series_uid
    ds.StudyDate = ds.SeriesDate = ds.AcquisitionDate = STUDY_DATE
    ds.SeriesTime = ds.AcquisitionTime = "100000"
    ds.Modality, ds.SeriesNumber, ds.SeriesDescription, ds.InstanceNumber = modality, number, description, k + 1
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit = 16, 16, 15
    return ds


def write_series(image: sitk.Image, folder: Path, number: int, description: str, study_uid: str) -> str:
    """One file per axial slice of a SimpleITK image (LPS geometry kept exactly); the series UID."""
    modality = _modality(description)
    folder.mkdir(parents=True, exist_ok=True)
    data = sitk.GetArrayFromImage(image).astype(np.float64)  # [k, j, i]
    direction = np.array(image.GetDirection()).reshape(3, 3)
    spacing, origin = np.array(image.GetSpacing()), np.array(image.GetOrigin())
    series_uid = generate_uid()
    if modality == "PT":  # the case's SUV → Bq/ml at the series time, stored as unsigned 16 bits with a slope
        data = np.maximum(data, 0.0) * decayed_dose() / (WEIGHT_KG * 1000.0)
        slope, intercept = max(float(data.max()), 1.0) / 65000.0, 0.0
    elif modality == "CT":
        slope, intercept = 1.0, -1024.0
    else:
        slope, intercept = 1.0, 0.0
    stored = np.clip(np.round((data - intercept) / slope), 0, 65535).astype(np.uint16)
    for k in range(stored.shape[0]):
        ds = _slice(study_uid, series_uid, modality, number, description, k)
        ds.ImagePositionPatient = [round(float(v), 6) for v in origin + direction[:, 2] * spacing[2] * k]
        ds.ImageOrientationPatient = [round(float(v), 6) for v in (*direction[:, 0], *direction[:, 1])]
        ds.PixelSpacing = [float(spacing[1]), float(spacing[0])]
        ds.SliceThickness = float(spacing[2])
        ds.Rows, ds.Columns = stored.shape[1], stored.shape[2]
        ds.PixelRepresentation = 0
        ds.RescaleSlope, ds.RescaleIntercept = f"{slope:.10g}", f"{intercept:g}"
        if modality == "PT":
            drug = Dataset()
            drug.Radiopharmaceutical = "Fluorodeoxyglucose"
            drug.RadionuclideTotalDose = f"{DOSE_BQ:.6g}"
            drug.RadionuclideHalfLife = f"{HALF_LIFE_S:g}"
            drug.RadiopharmaceuticalStartTime = "090000"
            ds.RadiopharmaceuticalInformationSequence = pydicom.Sequence([drug])
            ds.Units, ds.DecayCorrection, ds.CorrectedImage = "BQML", "START", ["ATTN", "DECY"]
            ds.PatientWeight = f"{WEIGHT_KG:g}"
        ds.PixelData = stored[k].tobytes()
        ds.save_as(folder / f"{number:02d}_{k + 1:04d}.dcm", enforce_file_format=True)
    return series_uid


def write_dicom_study(case: Path, out: Path) -> Path:
    """The case pack's volumes as one DICOM study under `out` (series numbered from 2 in the case's order)."""
    meta = json.loads((case / "case.json").read_text(encoding="utf-8"))
    study_uid = generate_uid()
    out.mkdir(parents=True, exist_ok=True)
    for n, rel in enumerate(meta["inputs"]["volumes"]):
        path = case / rel
        name = path.name.split(".")[0]
        write_series(sitk.ReadImage(str(path)), out / f"series_{n + 2:02d}", n + 2, name.replace("_", " "), study_uid)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", type=Path)
    parser.add_argument("out", type=Path)
    ns = parser.parse_args()
    print(write_dicom_study(ns.case, ns.out))


if __name__ == "__main__":
    main()
