"""Generated studies for the workstation tests: a DICOM folder holding two series, a NIfTI file."""

from __future__ import annotations

import locale
from pathlib import Path

import numpy as np
import SimpleITK as sitk


def write_dicom_series(folder: Path, data: np.ndarray, uid: str, description: str, number: int) -> None:
    """One DICOM file per slice of `data` ([k, j, i]) with 2 mm spacing, in the same folder as other series."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = sitk.ImageFileWriter()
    writer.KeepOriginalImageUIDOn()
    for k in range(data.shape[0]):
        image = sitk.GetImageFromArray(data[k].astype(np.int16))
        image.SetSpacing((2.0, 2.0))
        tags = {
            "0008|0060": "MR",
            "0008|103e": description,
            "0020|000e": uid,
            "0020|000d": "1.2.826.0.1.3680043.2.1125.1",
            "0020|0011": str(number),
            "0020|0013": str(k + 1),
            "0020|0032": f"0\\0\\{2.0 * k}",
            "0020|0037": "1\\0\\0\\0\\1\\0",
            "0018|0050": "2.0",
            "0008|0018": f"{uid}.{k + 1}",
        }
        for key, value in tags.items():
            image.SetMetaData(key, value)
        writer.SetFileName(str(folder / f"{number:02d}_{k:03d}.dcm"))
        saved = locale.setlocale(locale.LC_ALL)
        try:
            writer.Execute(image)
        finally:  # GDCM's writer switches the process to the C locale (text files would then open as ASCII)
            locale.setlocale(locale.LC_ALL, saved)


def dicom_two_series(root: Path) -> Path:
    """A folder with a 12-slice 'T1 axial' and a 10-slice 'FLAIR axial' series, files mixed together."""
    folder = root / "dicom_study"
    a = np.zeros((12, 40, 48), dtype=np.int16)
    a[3:9, 10:30, 12:36] = 400
    b = np.zeros((10, 32, 32), dtype=np.int16)
    b[2:8, 8:24, 8:24] = 900
    write_dicom_series(folder, a, "1.2.826.0.1.3680043.2.1125.11", "T1 axial", 3)
    write_dicom_series(folder, b, "1.2.826.0.1.3680043.2.1125.12", "FLAIR axial", 5)
    return folder


def nifti_file(root: Path) -> Path:
    """A 30×34×20 NIfTI volume (1.5 mm) with a bright block."""
    data = np.zeros((20, 34, 30), dtype=np.float32)
    data[5:15, 10:24, 8:22] = 100.0
    image = sitk.GetImageFromArray(data)
    image.SetSpacing((1.5, 1.5, 1.5))
    path = root / "patient_t2.nii.gz"
    sitk.WriteImage(image, str(path))
    return path


def petct_case_pack(case: Path, origin: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> Path:
    """A small case pack of a CT (5×12×10, 2 × 2.5 × 3 mm, a 45 HU block in air) and a PET in SUV (one 7.5 voxel),
    on one grid; `copilot.cases.dicom_study.write_dicom_study` turns it into a DICOM study."""
    import json

    (case / "images").mkdir(parents=True)
    ct = np.full((5, 12, 10), -1000, dtype=np.int16)
    ct[2, 4:8, 3:7] = 45
    suv = np.zeros((5, 12, 10), dtype=np.float32)
    suv[2, 5, 5] = 7.5
    for name, data in (("CT_chest", ct), ("PET_AC", suv)):
        image = sitk.GetImageFromArray(data)
        image.SetSpacing((2.0, 2.5, 3.0))
        image.SetOrigin(origin)
        sitk.WriteImage(image, str(case / "images" / f"{name}.nii.gz"))
    volumes = ["images/CT_chest.nii.gz", "images/PET_AC.nii.gz"]
    (case / "case.json").write_text(json.dumps({"inputs": {"volumes": volumes}}), encoding="utf-8")
    return case
