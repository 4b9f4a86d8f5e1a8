"""Multi-frame DICOM retrieved from a real PACS (Orthanc, DICOMweb): the series URL of an enhanced CT and of
pydicom's rtdose.dcm opens with the voxels and geometry of the file itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
import pytest

from copilot.engine.volume.loading import load_volume
from copilot.pacs.client import PacsClient
from copilot.pacs.orthanc import LocalOrthanc
from tests.test_multiframe import enhanced_ct, shipped
from tests.test_pacs import open_url, pacs, pacs_env, study_url, volume_of

__all__ = ["pacs", "pacs_env"]  # the PACS fixtures this module uses


@pytest.mark.parametrize("kind", ["enhanced_ct", "rtdose"])
def test_series_url_opens_like_the_file(pacs: LocalOrthanc, tmp_path: Path, kind: str) -> None:
    file = shipped("rtdose.dcm") if kind == "rtdose" else enhanced_ct(tmp_path, [0.0, 2.5, 5.0, 7.5])
    ds = pydicom.dcmread(file)
    assert len(PacsClient(pacs.dicomweb).store([ds], str(ds.StudyInstanceUID))) == 1
    session = open_url(study_url(pacs, ds, series=True), None)
    try:
        retrieved, direct = volume_of(session)["volume"], load_volume(file)
        assert retrieved.data.shape == direct.data.shape and np.array_equal(retrieved.data, direct.data)
        assert np.array_equal(retrieved.ijk_to_ras, direct.ijk_to_ras)
        assert retrieved.metadata.get("units") == direct.metadata.get("units")
    finally:
        session.close()
