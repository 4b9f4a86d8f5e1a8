"""Slide evidence outside the session: on a DICOM whole-slide image as Microscopy Bulk Simple Annotations (dciodvfy
clean, read back by highdicom with the slide referenced and the points in slide coordinates worked by hand), on a
slide file as GeoJSON annotations QuPath imports."""

from __future__ import annotations

import json
from pathlib import Path

import highdicom as hd
import numpy as np
import pytest
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid

from copilot.medflow import make_cases
from copilot.runtime import open_session
from copilot.tools.slide_ann import build_ann, geojson
from tests.dicom_validator import assert_valid_dicom

X0, Y0, SPACING = 20.0, 40.0, 0.00025  # the slide's origin (mm) and pixel spacing (mm)


def _wsi_header() -> Dataset:
    """The level-0 instance of a DICOM whole slide (header only): 8192 × 4096 pixels, rows along −X of the slide,
    columns along −Y (ImageOrientationSlide 0\\-1\\0\\-1\\0\\0, the usual one)."""
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.SOPClassUID, ds.SOPInstanceUID = "1.2.840.10008.5.1.4.1.1.77.1.6", generate_uid()
    ds.file_meta.MediaStorageSOPClassUID, ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPClassUID, ds.SOPInstanceUID
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = generate_uid(), generate_uid(), generate_uid()
    ds.Modality, ds.PatientID, ds.PatientName, ds.PatientBirthDate, ds.PatientSex = "SM", "S-1", "Test^Slide", "", ""
    ds.StudyDate, ds.StudyTime, ds.StudyID = "20240101", "1200", "1"
    ds.AccessionNumber, ds.ReferringPhysicianName = "", ""
    ds.ImageType, ds.ContainerIdentifier = ["ORIGINAL", "PRIMARY", "VOLUME", "NONE"], "SLIDE-1"
    ds.TotalPixelMatrixRows, ds.TotalPixelMatrixColumns, ds.Rows, ds.Columns = 4096, 8192, 256, 256
    ds.NumberOfFrames, ds.ImageOrientationSlide = 512, [0, -1, 0, -1, 0, 0]
    origin = Dataset()
    origin.XOffsetInSlideCoordinateSystem, origin.YOffsetInSlideCoordinateSystem = X0, Y0
    ds.TotalPixelMatrixOriginSequence = [origin]
    shared, measures = Dataset(), Dataset()
    measures.PixelSpacing, measures.SliceThickness = [SPACING, SPACING], 0.004
    shared.PixelMeasuresSequence = [measures]
    ds.SharedFunctionalGroupsSequence = [shared]
    return ds


def test_slide_points_and_regions_as_dicom_bulk_annotations(tmp_path: Path) -> None:
    """Point (x 100, y 200) lies at slide X = 20 − 200 · 0.00025 = 19.95 mm, Y = 40 − 100 · 0.00025 = 39.975 mm."""
    source = _wsi_header()
    ann = build_ann(source, [(100.0, 200.0, "mitosis")], [([(0, 0), (400, 0), (400, 300), (0, 300)], "view 1")], "ev")
    path = tmp_path / "ann.dcm"
    ann.save_as(path)
    assert_valid_dicom(path)
    back = hd.ann.annread(path)
    assert [str(r.ReferencedSOPInstanceUID) for s in back.ReferencedSeriesSequence
            for r in s.ReferencedInstanceSequence] == [source.SOPInstanceUID]  # fmt: skip
    points, regions = back.get_annotation_groups()
    assert (points.label, points.graphic_type.value, points.AnnotationGroupDescription) == ("points", "POINT",
                                                                                              "mitosis")  # fmt: skip
    assert np.allclose(points.get_graphic_data("3D")[0], [[19.95, 39.975, 0.0]])
    (outline,) = regions.get_graphic_data("3D")
    assert regions.graphic_type.value == "POLYGON"
    assert np.allclose(outline[:, :2], np.array([[20, 40], [20, 39.9], [19.925, 39.9], [19.925, 40]]))


@pytest.fixture(scope="module")
def slide_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (path,) = make_cases("breast_wsi", 1, 5, tmp_path_factory.mktemp("slide"), slide_size=(1024, 768), mpp=2.0)
    return Path(path)


def test_a_slide_file_gets_geojson_annotations(slide_case: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    session = open_session(slide_case, track="B", trace_dir=trace, allow_store=(str(trace / "derived"),))
    assert not session.call("export_slide_annotations", {"output_name": "ann"}).ok  # nothing recorded yet
    rec = session.call("record_view_evidence", {"label": "focus", "x": 500, "y": 500})
    assert rec.ok
    out = session.call("export_slide_annotations", {"output_name": "ann"})
    session.close()
    assert out.ok and out.result == {"file": "ann.geojson", "points": 1, "regions": 1, "stored_to": "file"}
    data = json.loads((trace / "derived" / "ann.geojson").read_text())
    point = rec.result["evidence"]["point"]
    assert data == geojson([(point["x"], point["y"], "focus")],
                           [([(a, b) for a, b in _corners(rec.result["evidence"]["visible_region"])], "focus")])
    assert data["features"][0]["geometry"] == {"type": "Point", "coordinates": [point["x"], point["y"]]}
    assert data["features"][1]["properties"] == {"objectType": "annotation", "name": "focus"}
    assert (trace / "derived" / "ann.geojson").stat().st_mode & 0o077 == 0


def _corners(box: list[float]) -> list[tuple[float, float]]:
    x0, y0, x1, y1 = box
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
