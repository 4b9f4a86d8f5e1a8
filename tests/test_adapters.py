"""Dataset adapters, each on a miniature synthetic copy of the dataset's published layout."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import numpy as np
import pydicom
import pytest
import SimpleITK as sitk
from pydicom.data import get_testdata_file

from copilot.adapters import adapt_bracs, adapt_camelyon17, adapt_lumiere, adapt_nsclc, adapt_ucsf_pdgm
from copilot.cases.annotations import Annotation, to_geojson
from copilot.cases.pack import load_case
from copilot.cases.slides import write_pyramid
from copilot.cases.wsi import write_asap_xml
from copilot.cli import main
from copilot.engine.loading import load_volume
from copilot.medflow import score_case
from copilot.runtime import open_session
from tests.oracle import perfect_response


def _nifti(path: Path, arr: np.ndarray, spacing=(1.5, 1.5, 2.0)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = sitk.GetImageFromArray(arr)
    img.SetSpacing(spacing)
    sitk.WriteImage(img, str(path))


def _brain(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    img = rng.uniform(100, 200, (12, 14, 16)).astype(np.float32)
    seg = np.zeros(img.shape, np.uint8)
    seg[4:8, 5:9, 6:10] = 4
    seg[5:7, 6:8, 7:9] = 1
    img[seg > 0] = 600
    return img, seg


def _write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_ucsf_pdgm(tmp_path: Path) -> None:
    src = tmp_path / "UCSF-PDGM-v3"
    for n, _diagnosis in (
        (4, "Glioblastoma, IDH-wildtype"),
        (7, "Oligodendroglioma, IDH-mutant, 1p/19q-codeleted"),
        (9, "Pilocytic astrocytoma"),
    ):
        img, seg = _brain(n)
        folder = src / f"UCSF-PDGM-{n:04d}_nifti"
        for s in ("T1", "T1c", "T2", "FLAIR"):
            _nifti(folder / f"UCSF-PDGM-{n:04d}_{s}.nii.gz", img)
        _nifti(folder / f"UCSF-PDGM-{n:04d}_tumor_segmentation.nii.gz", seg)
    _write_csv(
        src / "UCSF-PDGM-metadata_v2.csv",
        [
            {"ID": "UCSF-PDGM-004", "Final pathologic diagnosis (WHO 2021)": "Glioblastoma, IDH-wildtype"},
            {"ID": "UCSF-PDGM-007", "Final pathologic diagnosis (WHO 2021)": "Oligodendroglioma, IDH-mutant"},
            {"ID": "UCSF-PDGM-009", "Final pathologic diagnosis (WHO 2021)": "Pilocytic astrocytoma"},
        ],
    )
    made = adapt_ucsf_pdgm(src, tmp_path / "packs")
    labels = {p.name: json.loads((p / "hidden" / "truth.json").read_text())["label"] for p in made}
    assert labels == {"UCSF-PDGM-0004": "A", "UCSF-PDGM-0007": "B", "UCSF-PDGM-0009": "E"}
    case = made[0]
    assert (case / "images" / "T1c.nii.gz").is_symlink()
    session = open_session(case)  # the viewer opens linked source files
    assert [v["name"] for v in session._viewer.inventory()] == ["T1", "T1c", "T2", "FLAIR"]
    assert score_case(case, perfect_response(case)).strict == 1.0


def test_lumiere(tmp_path: Path) -> None:
    src = tmp_path / "Imaging"
    for week in ("week-000-1", "week-010", "week-044"):
        base = src / "Patient-001" / week / "DeepBraTumIA-segmentation" / "atlas"
        img, seg = _brain(len(week))
        for s in ("ct1", "t1", "t2", "flair"):
            _nifti(base / "skull_strip" / f"{s}_skull_strip.nii.gz", img)
        _nifti(base / "segmentation" / "seg_mask.nii.gz", seg)
    _write_csv(
        tmp_path / "LUMIERE-ExpertRating-v202211.csv",
        [
            {"Patient": "Patient-001", "Date": "week-000-1", "Rating": "Pre-Op", "T2_PROGRESSION": ""},
            {"Patient": "Patient-001", "Date": "week-044", "Rating": "PD", "T2_PROGRESSION": "yes"},
        ],
    )
    made = adapt_lumiere(src, tmp_path / "packs", tmp_path / "LUMIERE-ExpertRating-v202211.csv")
    assert [p.name for p in made] == ["Patient-001__week-010__to__week-044"]
    truth = json.loads((made[0] / "hidden" / "truth.json").read_text())
    assert truth["label"] == "A" and truth["fields"]["T2_PROGRESSION"] == "YES"
    assert truth["fields"]["NEW_TARGET_LESION"] is None  # not in the CSV: not scorable
    names = [v["name"] for v in open_session(made[0])._viewer.inventory()]
    assert names[:4] == ["OLD_CT1", "OLD_T1", "OLD_T2", "OLD_FLAIR"] and names[4] == "CURRENT_CT1"
    assert score_case(made[0], perfect_response(made[0])).strict == 1.0


def _dicom_series(folder: Path, n: int, modality: str, series_uid: str) -> list[pydicom.Dataset]:
    base = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    folder.mkdir(parents=True)
    out = []
    for k in range(n):
        ds = copy.deepcopy(base)
        ds.Modality = modality
        ds.SeriesInstanceUID = series_uid
        ds.SOPInstanceUID = pydicom.uid.generate_uid()
        ds.InstanceNumber = k + 1
        ds.ImagePositionPatient = [-158.0, -179.0, -75.0 + 2.5 * k]
        ds.SliceThickness = "2.5"
        ds.save_as(folder / f"{modality}_{k:03d}.dcm")
        out.append(ds)
    return out


def test_nsclc_radiogenomics_with_dicom_seg(tmp_path: Path) -> None:
    import highdicom as hd
    from pydicom.sr.codedict import codes

    patient = tmp_path / "NSCLC" / "R01-001" / "study"
    ct = _dicom_series(patient / "ct", 5, "CT", pydicom.uid.generate_uid())
    _dicom_series(patient / "pet", 4, "PT", pydicom.uid.generate_uid())
    mask = np.zeros((5, 128, 128), np.uint8)
    mask[1:4, 40:60, 50:70] = 1
    desc = hd.seg.SegmentDescription(
        segment_number=1,
        segment_label="tumor",
        segmented_property_category=codes.SCT.MorphologicallyAbnormalStructure,
        segmented_property_type=codes.SCT.Neoplasm,
        algorithm_type=hd.seg.SegmentAlgorithmTypeValues.MANUAL,
    )
    seg = hd.seg.Segmentation(
        source_images=ct,
        pixel_array=mask,
        segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
        segment_descriptions=[desc],
        series_instance_uid=hd.UID(),
        series_number=9,
        sop_instance_uid=hd.UID(),
        instance_number=1,
        manufacturer="MedCopilot tests",
        manufacturer_model_name="adapter fixture",
        software_versions="1",
        device_serial_number="0",
    )
    (patient / "seg").mkdir()
    seg.save_as(patient / "seg" / "seg.dcm")
    _write_csv(
        tmp_path / "NSCLC" / "NSCLCR01Radiogenomic_DATA_LABELS.csv",
        [
            {
                "Case ID": "R01-001",
                "Histology ": "Squamous cell carcinoma",
                "Pathological T stage": "T2a",
                "Pathological N stage": "N1",
                "Histopathological Grade": "G3 Poorly differentiated",
                "Tumor Location (choice=RUL)": "Unchecked",
                "Tumor Location (choice=RLL)": "Checked",
            }
        ],
    )
    made = adapt_nsclc(tmp_path / "NSCLC", tmp_path / "packs")
    truth = json.loads((made[0] / "hidden" / "truth.json").read_text())
    assert truth["answers"] == {"1": "C", "2": "B", "3": "B", "4": "B", "5": "C"}
    out = load_volume(made[0] / "hidden" / "mask.nii.gz")
    ct_vol = load_volume(patient / "ct")
    assert np.allclose(out.ijk_to_ras, ct_vol.ijk_to_ras, atol=1e-4)  # on the source series' grid
    assert np.array_equal(out.data > 0, mask > 0)
    session = open_session(made[0])
    assert [v["name"] for v in session._viewer.inventory()] == ["CT", "PET"]
    assert score_case(made[0], perfect_response(made[0])).strict == 1.0


def test_bracs(tmp_path: Path) -> None:
    img = np.full((512, 768, 3), 235, np.uint8)
    img[100:300, 200:400] = (90, 50, 130)
    slide = write_pyramid(
        tmp_path / "BRACS_WSI" / "train" / "Group_MT" / "Type_DCIS" / "BRACS_1234.tif", img, 0.25, downsamples=(1, 4)
    )
    ann = Annotation("DCIS", np.array([[200, 100], [400, 100], [400, 300], [200, 300]], float))
    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "BRACS_1234.geojson").write_text(json.dumps(to_geojson([ann])))
    made = adapt_bracs(tmp_path / "BRACS_WSI", tmp_path / "packs", tmp_path / "ann")
    assert json.loads((made[0] / "hidden" / "truth.json").read_text())["label"] == "DCIS"
    assert (made[0] / "images" / "slide.tif").resolve() == slide.resolve()
    assert open_session(made[0])._viewer.state()["dimensions"] == [768, 512]
    assert score_case(made[0], perfect_response(made[0])).strict == 1.0


def test_camelyon17(tmp_path: Path) -> None:
    root = tmp_path / "training"
    img = np.full((400, 600, 3), 230, np.uint8)
    for name in ("patient_004_node_4", "patient_004_node_1"):
        write_pyramid(root / "center_2" / f"{name}.tif", img, 0.24, downsamples=(1, 4))
    tumour = Annotation("Tumor", np.array([[100, 100], [300, 100], [300, 250], [100, 250]], float))
    (root / "lesion_annotations").mkdir()
    write_asap_xml(root / "lesion_annotations" / "patient_004_node_4.xml", [tumour])
    _write_csv(
        root / "stage_labels.csv",
        [
            {"patient": "patient_004.zip", "stage": "pN1"},
            {"patient": "patient_004_node_1.tif", "stage": "negative"},
            {"patient": "patient_004_node_4.tif", "stage": "macro"},
        ],
    )
    made = adapt_camelyon17(root, tmp_path / "packs")
    assert sorted(p.name for p in made) == ["patient_004_node_1", "patient_004_node_4"]
    pos = tmp_path / "packs" / "patient_004_node_4"
    truth = json.loads((pos / "hidden" / "truth.json").read_text())
    assert truth == {**truth, "tumor_presence": "tumor_present", "largest_metastasis": "macro"}
    assert score_case(pos, perfect_response(pos)).strict == 1.0
    assert load_case(pos).kind == "pathology"


def test_adapt_command(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "training"
    write_pyramid(
        root / "center_0" / "patient_000_node_0.tif", np.full((300, 300, 3), 220, np.uint8), 0.24, downsamples=(1,)
    )
    _write_csv(root / "stage_labels.csv", [{"patient": "patient_000_node_0.tif", "stage": "negative"}])
    assert main(["cases", "adapt", "--dataset", "camelyon17", "--src", str(root), "--out", str(tmp_path / "o")]) == 0
    assert "patient_000_node_0" in capsys.readouterr().out
