"""A small CT study made from pydicom's own CT test image: for the tests and the demo's PACS step."""

from __future__ import annotations

import copy
from pathlib import Path

import pydicom

SAMPLE_PATIENT = {"PatientID": "MC-PACS-0042", "PatientName": "Testpatient^Pacs", "AccessionNumber": "ACC-7731"}


def write_ct_series(folder: Path, n: int = 8) -> list[pydicom.Dataset]:
    """An axial CT series from pydicom's CT_small.dcm: `n` slices 2.5 mm apart, a bright block moving per slice,
    new UIDs and the sample patient's identifiers."""
    from pydicom.data import get_testdata_file

    base = pydicom.dcmread(str(get_testdata_file("CT_small.dcm")))
    study, series, frame = (pydicom.uid.generate_uid() for _ in range(3))
    folder.mkdir(parents=True)
    written: list[pydicom.Dataset] = []
    for k in range(n):
        ds = copy.deepcopy(base)
        ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = study, series, frame
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = pydicom.uid.generate_uid()
        for keyword, value in SAMPLE_PATIENT.items():
            setattr(ds, keyword, value)
        ds.StudyDate, ds.SeriesDescription, ds.SeriesNumber = "20240611", "chest axial", 3
        ds.ImagePositionPatient = [-40.0, -30.0, 10.0 + 2.5 * k]
        ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
        ds.SliceThickness, ds.InstanceNumber = "2.5", k + 1
        arr = base.pixel_array.copy()
        arr[40 + k : 60 + k, 50:70] = 1200 + 10 * k
        ds.PixelData = arr.tobytes()
        ds.save_as(folder / f"slice_{k:02d}.dcm")
        written.append(ds)
    return written
