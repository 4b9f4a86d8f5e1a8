"""Dataset adapters on miniature copies of the real releases: the published headers, file and folder
names, id patterns, value spellings and class names, with tiny stand-in images."""

from __future__ import annotations

import copy
import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pydicom
import pytest
import SimpleITK as sitk
from pydicom.data import get_testdata_file

from copilot.adapters.bracs import adapt_bracs
from copilot.adapters.camelyon17 import adapt_camelyon17
from copilot.adapters.common import AdapterError
from copilot.adapters.lumiere import adapt_lumiere
from copilot.adapters.nsclc import adapt_nsclc, grade_letter, location_letter, t_letter
from copilot.adapters.ucsf_pdgm import adapt_ucsf_pdgm, diagnosis_letter
from copilot.bench.scoring.rules import parse_rules
from copilot.bench.scoring.scorers import summarise
from copilot.cases.annotations import Annotation, to_geojson
from copilot.cases.bracs_classes import bracs_label
from copilot.cases.pack import load_case
from copilot.cases.slides import write_pyramid
from copilot.cases.wsi import write_asap_xml
from copilot.cli import main
from copilot.engine.volume.loading import load_volume
from copilot.medflow import score_case
from copilot.runtime import open_session
from tests.dicom_validator import assert_valid_dicom
from tests.oracle import evidence_block, perfect_evidence, perfect_response

# --- shared writers ----------------------------------------------------------------------------


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


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def _truth(case: Path) -> dict:
    return json.loads((case / "hidden" / "truth.json").read_text())


# --- UCSF-PDGM ----------------------------------------------------------------------------------

PDGM_HEADER = ["ID", "Sex", "Age at MRI", "WHO CNS Grade", "Final pathologic diagnosis (WHO 2021)", "MGMT status",
               "MGMT index", "1p/19q", "IDH", "1-dead 0-alive", "OS", "EOR", "Biopsy prior to imaging", "BraTS21 ID",
               "BraTS21 Segmentation Cohort", "BraTS21 MGMT Cohort"]  # fmt: skip
PDGM_ROWS = [  # rows of UCSF-PDGM-metadata_v5.csv as released (the follow-up rows are in the release)
    ["UCSF-PDGM-004", "M", "66", "4", "Glioblastoma, IDH-wildtype", "negative", "0", "unknown", "wildtype", "1",
     "1303", "STR", "No", "BraTS2021_00097", "Training", "Training"],
    ["UCSF-PDGM-007", "M", "70", "4", "Glioblastoma, IDH-wildtype", "indeterminate", "unknown", "unknown",
     "wildtype", "1", "417", "STR", "No", "BraTS2021_00103", "Training", ""],
    ["UCSF-PDGM-016", "F", "57", "4", "Glioblastoma, IDH-wildtype", "positive", "7", "unknown", "wildtype", "0",
     "14", "STR", "Yes", "BraTS2021_00054", "Training", "Training"],
    ["UCSF-PDGM-0391_FU016d", "F", "59", "4", "Glioblastoma, IDH-wildtype", "positive", "17", "intact",
     "wildtype", "0", "711", "STR", "No", "", "", ""],
    ["UCSF-PDGM-0433_FU007d", "M", "65", "4", "Glioblastoma, IDH-wildtype", "positive", "17", "intact",
     "wildtype", "1", "205", "GTR", "No", "BraTS2021_00758", "Training", "Training"],
    ["UCSF-PDGM-236", "F", "35", "2", "Oligodendroglioma, IDH-mutant, 1p/19q-codeleted", "unknown", "unknown",
     "co-deletion", "mutated (NOS)", "0", "2209", "GTR", "No", "", "", ""],
    ["UCSF-PDGM-433", "M", "65", "4", "Glioblastoma, IDH-wildtype", "positive", "17", "intact", "wildtype", "1",
     "205", "GTR", "No", "BraTS2021_00626", "Training", "Training"],
]  # fmt: skip


@pytest.fixture(scope="module")
def pdgm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """UCSF-PDGM-v3 download: <id>_nifti folders (a baseline, its follow-up, others) and metadata v5."""
    src = tmp_path_factory.mktemp("pdgm") / "UCSF-PDGM-v3"
    img, seg = _brain(4)
    first = None
    for stem in ("UCSF-PDGM-0004", "UCSF-PDGM-0007", "UCSF-PDGM-0236", "UCSF-PDGM-0433", "UCSF-PDGM-0433_FU007d",
                 "UCSF-PDGM-0006"):  # fmt: skip
        folder = src / f"{stem}_nifti"
        for s in ("T1", "T1c", "T2", "FLAIR", "tumor_segmentation"):
            target = folder / f"{stem}_{s}.nii.gz"
            if first is None:
                _nifti(target, seg if s == "tumor_segmentation" else img)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(first[s], target)
        first = first or {s: folder / f"{stem}_{s}.nii.gz" for s in ("T1", "T1c", "T2", "FLAIR", "tumor_segmentation")}
    _write_csv(src / "UCSF-PDGM-metadata_v5.csv", PDGM_HEADER, [*PDGM_ROWS, PDGM_ROWS[0]])  # one duplicated row
    return src


def test_ucsf_pdgm_baseline_and_follow_up(pdgm: Path, tmp_path: Path) -> None:
    report = adapt_ucsf_pdgm(pdgm, tmp_path / "packs")
    truths = {p.name: _truth(p) for p in report.cases}
    assert sorted(truths) == ["UCSF-PDGM-0004", "UCSF-PDGM-0007", "UCSF-PDGM-0236", "UCSF-PDGM-0433"]
    # the last number of 0433_FU007d is 7: the row of 0007 is its own, never the follow-up's
    assert truths["UCSF-PDGM-0007"]["csv_id"] == "UCSF-PDGM-007"
    assert truths["UCSF-PDGM-0433"]["csv_id"] == "UCSF-PDGM-433"
    assert truths["UCSF-PDGM-0236"] == {**truths["UCSF-PDGM-0236"], "label": "B"}
    assert report.skipped_ids["follow-up study (excluded by rule)"] == ["UCSF-PDGM-0433_FU007d"]
    assert report.skipped_ids["no metadata row"] == ["UCSF-PDGM-0006"]
    assert report.duplicates == 1
    assert report.summary() == (
        "ucsf_pdgm: 4 cases written; 2 skipped (follow-up study (excluded by rule) 1, no metadata row 1); "
        "1 duplicates removed; unscorable: none"
    )
    case = tmp_path / "packs" / "UCSF-PDGM-0004"
    assert (case / "images" / "T1c.nii.gz").is_symlink()
    assert [v["name"] for v in open_session(case)._viewer.inventory()] == ["T1", "T1c", "T2", "FLAIR"]
    assert score_case(case, perfect_response(case)).strict == 1.0


def test_ucsf_pdgm_follow_ups_as_their_own_studies(pdgm: Path, tmp_path: Path) -> None:
    report = adapt_ucsf_pdgm(pdgm, tmp_path / "packs", follow_ups="include")
    fu = tmp_path / "packs" / "UCSF-PDGM-0433_FU007d"
    assert fu in report.cases and _truth(fu)["csv_id"] == "UCSF-PDGM-0433_FU007d"
    assert _truth(tmp_path / "packs" / "UCSF-PDGM-0007")["csv_id"] == "UCSF-PDGM-007"


def test_ucsf_pdgm_every_released_diagnosis_maps_explicitly() -> None:
    assert diagnosis_letter("Glioblastoma, IDH-wildtype") == "A"
    assert diagnosis_letter("Astrocytoma, IDH-mutant") == "B"
    assert diagnosis_letter("Astrocytoma, IDH-wildtype") == "B"
    assert diagnosis_letter("Oligodendroglioma, IDH-mutant, 1p/19q-codeleted") == "B"
    assert diagnosis_letter("Pilocytic astrocytoma") == "E"
    assert diagnosis_letter("Something else") is None


def test_missing_metadata_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "UCSF-PDGM-0004_nifti").mkdir()
    with pytest.raises(AdapterError, match="metadata CSV not found"):
        adapt_ucsf_pdgm(tmp_path, tmp_path / "out")
    assert main(["cases", "adapt", "--dataset", "lumiere", "--src", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "error: LUMIERE expert rating CSV not found" in capsys.readouterr().err


# --- LUMIERE ------------------------------------------------------------------------------------

LUMIERE_RATING = ("Rating (according to RANO, PD: Progressive disease, SD: Stable disease, PR: Partial response, "
                  "CR: Complete response, Pre-Op: Pre-Operative, Post-Op: Post-Operative)")  # fmt: skip
LUMIERE_RATIONALE = ("Rating rationale (CRET: complete resection of the enhancing tumor, PRET: partial resection of "
                     "the enhancing tumor, T2-Progr.: T2-Progression, L: Lesion)")  # fmt: skip


@pytest.fixture(scope="module")
def lumiere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LUMIERE: Imaging/Patient-001/week-*/DeepBraTumIA-segmentation/atlas/…, the rating CSV beside Imaging/."""
    root = tmp_path_factory.mktemp("lumiere")
    for week in ("week-000-2", "week-010", "week-044"):
        base = root / "Imaging" / "Patient-001" / week / "DeepBraTumIA-segmentation" / "atlas"
        img, seg = _brain(len(week))
        for s in ("ct1", "t1", "t2", "flair"):
            _nifti(base / "skull_strip" / f"{s}_skull_strip.nii.gz", img)
        _nifti(base / "segmentation" / "seg_mask.nii.gz", seg)
    (root / "Imaging" / "Patient-001" / "week-000-1").mkdir()
    _write_csv(
        root / "LUMIERE-ExpertRating-v202211.csv",
        ["Patient", "Date", "LessThan3Months", "NonMeasurableLesions", LUMIERE_RATING, LUMIERE_RATIONALE],
        [
            ["Patient-001", "week-000-1", "", "", "Pre-Op", ""],
            ["Patient-001", "week-000-2", "", "", "Post-Op", "CRET"],
            ["Patient-001", "week-010", "x", "", "SD ", ""],  # trailing space, as released
            ["Patient-001", "week-044", "", "x", "PD", "T2-Progr., new target L."],
            ["Patient-001", "week-044", "", "x", "PD", "T2-Progr., new target L."],  # a duplicated row
            ["Patient-002", "week-003", "", "", "PD", "new L."],  # no imaging for this patient
        ],
    )
    return root


def test_lumiere_long_header_duplicates_and_lesion_fields(lumiere: Path, tmp_path: Path) -> None:
    report = adapt_lumiere(lumiere, tmp_path / "packs")  # the dataset folder: CSV beside Imaging/
    names = sorted(p.name for p in report.cases)
    assert names == ["Patient-001__week-000-2__to__week-010", "Patient-001__week-010__to__week-044"]
    assert report.duplicates == 1
    sd, pd_ = (_truth(tmp_path / "packs" / n) for n in names)
    assert sd["label"] == "B" and set(sd["fields"].values()) == {None}  # nothing stated: unscorable, not NO
    assert sd["less_than_3_months"] is True and pd_["less_than_3_months"] is False
    assert pd_["label"] == "A" and pd_["fields"] == {
        "NON_MEASURABLE_LESION": "YES",
        "T2_PROGRESSION": "YES",
        "CURRENT_TARGET_LESION": None,
        "NEW_TARGET_LESION": "YES",
        "CURRENT_NON_TARGET_LESION": None,
        "NEW_NON_TARGET_LESION": None,
    }
    assert report.summary() == (
        "lumiere: 2 cases written; 3 skipped (no imaging for the rated week 1, "
        "not a response rating (Pre-Op, Post-Op, …) 2); 1 duplicates removed; unscorable: "
        "CURRENT_NON_TARGET_LESION 2, CURRENT_TARGET_LESION 2, NEW_NON_TARGET_LESION 2, NEW_TARGET_LESION 1, "
        "NON_MEASURABLE_LESION 1, T2_PROGRESSION 1"
    )
    case = tmp_path / "packs" / names[1]
    names_seen = [v["name"] for v in open_session(case)._viewer.inventory()]
    assert names_seen[:4] == ["OLD_CT1", "OLD_T1", "OLD_T2", "OLD_FLAIR"] and names_seen[4] == "CURRENT_CT1"
    assert score_case(case, perfect_response(case)).strict == 1.0
    wrong_unscorable = perfect_response(case).replace("CURRENT_TARGET_LESION: NO", "CURRENT_TARGET_LESION: YES")
    assert score_case(case, wrong_unscorable).strict == 1.0  # an unscorable field is not in the gate
    wrong_t2 = perfect_response(case).replace("T2_PROGRESSION: YES", "T2_PROGRESSION: NO")
    assert score_case(case, wrong_t2).strict == 0.0


def test_lumiere_from_the_imaging_folder(lumiere: Path, tmp_path: Path) -> None:
    report = adapt_lumiere(lumiere / "Imaging", tmp_path / "packs")  # the CSV is found beside it
    assert len(report.cases) == 2


# --- NSCLC Radiogenomics ------------------------------------------------------------------------

NSCLC_HEADER = ["Case ID", "Patient affiliation", "Age at Histological Diagnosis", "Gender", "%GG",
                "Tumor Location (choice=RUL)", "Tumor Location (choice=RML)", "Tumor Location (choice=RLL)",
                "Tumor Location (choice=LUL)", "Tumor Location (choice=LLL)", "Tumor Location (choice=L Lingula)",
                "Tumor Location (choice=Unknown)", "Histology ", "Pathological T stage", "Pathological N stage",
                "Pathological M stage", "Histopathological Grade", "Lymphovascular invasion"]  # fmt: skip


def _dicom_series(folder: Path, n: int, modality: str, z0: float, dz: float) -> list[pydicom.Dataset]:
    base = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    folder.mkdir(parents=True)
    uid = pydicom.uid.generate_uid()
    out = []
    for k in range(n):
        ds = copy.deepcopy(base)
        ds.Modality = modality
        ds.SeriesInstanceUID = uid
        ds.SOPInstanceUID = pydicom.uid.generate_uid()
        ds.InstanceNumber = k + 1
        ds.ImagePositionPatient = [-158.0, -179.0, z0 + dz * k]
        ds.SliceThickness = str(dz)
        ds.save_as(folder / f"1-{k + 1:03d}.dcm")
        out.append(ds)
    return out


def _seg(source: list[pydicom.Dataset], mask: np.ndarray, path: Path) -> None:
    import highdicom as hd
    from pydicom.sr.codedict import codes

    desc = hd.seg.SegmentDescription(
        segment_number=1,
        segment_label="tumor",
        segmented_property_category=codes.SCT.MorphologicallyAbnormalStructure,
        segmented_property_type=codes.SCT.Neoplasm,
        algorithm_type=hd.seg.SegmentAlgorithmTypeValues.MANUAL,
    )
    seg = hd.seg.Segmentation(
        source_images=source, pixel_array=mask, segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
        segment_descriptions=[desc], series_instance_uid=hd.UID(), series_number=1000, sop_instance_uid=hd.UID(),
        instance_number=1, manufacturer="MedCopilot tests", manufacturer_model_name="adapter fixture",
        software_versions="1", device_serial_number="0",
    )  # fmt: skip
    path.parent.mkdir(parents=True)
    seg.save_as(path)
    assert_valid_dicom(path)


@pytest.fixture(scope="module")
def nsclc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NBIA download of NSCLC Radiogenomics: R01-001 with two CT series (the SEG references the smaller),
    PET and SEG; R01-002 without SEG; R01-003 unreadable; R01-004 ambiguous; AMC-001; the clinical CSV
    with its real header spellings."""
    root = tmp_path_factory.mktemp("nsclc") / "NSCLC Radiogenomics"
    study = root / "R01-001" / "09-06-1990-NA-CT CHEST WITH CONTRAST-12345"
    ct = _dicom_series(study / "3.000000-CHEST 2.5MM-54321", 5, "CT", -75.0, 2.5)
    _dicom_series(study / "4.000000-LUNG 1.25MM-54322", 8, "CT", -80.0, 1.25)  # larger, not referenced
    _dicom_series(root / "R01-001" / "09-06-1990-NA-PET CT-23456" / "2.000000-PET WB-65432", 4, "PT", -75.0, 3.0)
    mask = np.zeros((5, 128, 128), np.uint8)
    mask[1:4, 40:60, 50:70] = 1
    _seg(ct, mask, study / "1000.000000-3D Slicer segmentation result-76543" / "1-1.dcm")
    _dicom_series(root / "R01-002" / "01-01-1990-NA-CT-11111" / "2.000000-CHEST-22222", 3, "CT", 0.0, 2.5)
    broken = root / "R01-003" / "02-02-1990-NA-CT-33333"  # a SEG that is not a segmentation: unreadable
    _dicom_series(broken / "2.000000-CHEST-44444", 3, "CT", 0.0, 2.5)
    _dicom_series(broken / "3.000000-PET-44445", 3, "PT", 0.0, 2.5)
    _dicom_series(broken / "1000.000000-SEG-44446", 1, "SEG", 0.0, 2.5)
    two = root / "R01-004" / "03-03-1990-NA-CT-55555"  # two SEGs on two CT series: ambiguous
    small = np.zeros((3, 128, 128), np.uint8)
    small[1, 40:60, 50:70] = 1
    for n in (2, 3):
        series = _dicom_series(two / f"{n}.000000-CHEST-5555{n}", 3, "CT", 10.0 * n, 2.5)
        _seg(series, small, two / f"100{n}.000000-SEG-6666{n}" / "1-1.dcm")
    _dicom_series(two / "4.000000-PET-55554", 3, "PT", 0.0, 2.5)
    (root / "AMC-001").mkdir()
    unchecked = ["Unchecked"] * 7
    _write_csv(
        root / "NSCLCR01Radiogenomic_DATA_LABELS_2018-05-22_1500-shifted.csv",
        NSCLC_HEADER,
        [
            ["R01-001", "Stanford", "68", "Male", "0%", *unchecked[:6], "Checked", "Squamous cell carcinoma", "T2a",
             "N1", "M0", "Not Collected", "Absent"],
            ["R01-002", "Stanford", "70", "Female", "0%", "Checked", *unchecked[:6], "Adenocarcinoma", "T1a", "N0",
             "M0", "G1 Well differentiated", "Absent"],
            ["R01-003", "Stanford", "71", "Male", "0%", "Checked", *unchecked[:6], "Adenocarcinoma", "T3", "N2",
             "M0", "G3 Poorly differentiated", "Present"],
            ["R01-004", "Stanford", "66", "Female", "0%", "Checked", *unchecked[:6], "Adenocarcinoma", "T1b", "N0",
             "M0", "G1 Well differentiated", "Absent"],
            ["AMC-001", "Palo Alto VA", "60", "Male", "0%", *unchecked[:5], "Checked", "Unchecked",
             "Adenocarcinoma", "T1b", "N0", "M0", "G2 Moderately differentiated", "Absent"],
        ],
    )  # fmt: skip
    return root


def test_nsclc_two_ct_series_uses_the_one_the_seg_references(nsclc: Path, tmp_path: Path) -> None:
    report = adapt_nsclc(nsclc, tmp_path / "packs")
    assert [p.name for p in report.cases] == ["R01-001"]
    assert report.skipped_ids == {
        "AMC cohort (excluded by default)": ["AMC-001"],
        "ambiguous: SEGs reference several CT series": ["R01-004"],
        "no SEG": ["R01-002"],
        "unreadable": ["R01-003"],
    }
    assert report.failures[0][0] == "R01-003"  # reported with its error; the run went on
    case = report.cases[0]
    truth = _truth(case)
    # Unknown location and Not Collected grade are unscorable, never "No tumor" (1G / 5F)
    assert truth["answers"] == {"1": None, "2": "B", "3": "B", "4": "B", "5": None}
    assert report.summary() == (
        "nsclc: 1 cases written; 4 skipped (AMC cohort (excluded by default) 1, "
        "ambiguous: SEGs reference several CT series 1, no SEG 1, unreadable 1); "
        "0 duplicates removed; "
        "unscorable: histopathological grade 1, tumor location 1"
    )
    series = nsclc / "R01-001" / "09-06-1990-NA-CT CHEST WITH CONTRAST-12345"
    referenced = load_volume(series / "3.000000-CHEST 2.5MM-54321")
    out = load_volume(case / "hidden" / "mask.nii.gz")
    assert np.allclose(out.ijk_to_ras, referenced.ijk_to_ras, atol=1e-4) and out.data.shape == (5, 128, 128)
    assert len(list((case / "images" / "CT").iterdir())) == 5  # the referenced series, not the 8-slice one
    assert [v["name"] for v in open_session(case)._viewer.inventory()] == ["CT", "PET"]
    slices, ras = perfect_evidence(case)
    right = f"Rationale.\n{evidence_block(slices, ras)}1G2B3B4B5F"  # 1 and 5 cannot be answered correctly
    assert (score_case(case, right).task, score_case(case, right).strict) == (0.6, 0.6)  # Table 4: #correct / 5
    scorable = parse_rules(["lung_task_denominator=scorable"])  # 1 and 5 out of the denominator: 3/3, 2/3
    assert (score_case(case, right, rules=scorable).task, score_case(case, right, rules=scorable).strict) == (1.0, 1.0)
    assert score_case(case, f"{evidence_block(slices, ras)}1G2A3B4B5F", rules=scorable).task == pytest.approx(2 / 3)


def test_nsclc_clinical_value_spellings() -> None:
    row = {c: "Unchecked" for c in NSCLC_HEADER if c.startswith("Tumor Location")}
    assert location_letter({**row, "Tumor Location (choice=RLL)": "Checked"}) == "C"
    assert location_letter({**row, "Tumor Location (choice=L Lingula)": "Checked"}) == "F"
    assert location_letter({**row, "Tumor Location (choice=Unknown)": "Checked"}) is None
    assert (
        location_letter({**row, "Tumor Location (choice=RUL)": "Checked", "Tumor Location (choice=LUL)": "Checked"})
        is None
    )
    assert grade_letter("Other, Type II: Moderately to poorly differentiated") == "E"
    assert grade_letter("Not Collected") is None
    assert t_letter("Not Collected") == "E" and t_letter("Tis") == "A" and t_letter("T4") == "D"


# --- BRACS --------------------------------------------------------------------------------------

DCIS_ROI = np.array([[200, 100], [400, 100], [400, 300], [200, 300]], float)
UDH_ROI = np.array([[500, 320], [700, 320], [700, 480], [500, 480]], float)


@pytest.fixture(scope="module")
def bracs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BRACS_WSI/train/Group_*/Type_*/BRACS_<id> slides and BRACS_WSI_Annotations with both GeoJSON
    names, a .qpdata only, and a normal slide without annotations."""
    root = tmp_path_factory.mktemp("bracs")
    img = np.full((512, 768, 3), 235, np.uint8)
    img[100:300, 200:400] = (90, 50, 130)
    for group, label, sid in (("Group_MT", "DCIS", "1234"), ("Group_AT", "ADH", "1235"), ("Group_MT", "IC", "1236"),
                              ("Group_BT", "N", "1237")):  # fmt: skip
        write_pyramid(root / "BRACS_WSI" / "train" / group / f"Type_{label}" / f"BRACS_{sid}.svs", img, 0.25, (1, 4))
    ann = root / "BRACS_WSI_Annotations" / "train"
    feats = to_geojson([Annotation("DCIS-sure", DCIS_ROI), Annotation("UDH-sure", UDH_ROI)])
    (ann / "Group_MT" / "Type_DCIS").mkdir(parents=True)
    (ann / "Group_MT" / "Type_DCIS" / "BRACS_1234.qpdata.geojson").write_text(json.dumps(feats))
    (ann / "Group_AT" / "Type_ADH").mkdir(parents=True)
    (ann / "Group_AT" / "Type_ADH" / "BRACS_1235.geojson").write_text(
        json.dumps(to_geojson([Annotation("ADH-sure", DCIS_ROI), Annotation("Pathologica benign", UDH_ROI)]))
    )
    (ann / "Group_MT" / "Type_IC").mkdir(parents=True)
    (ann / "Group_MT" / "Type_IC" / "BRACS_1236.qpdata").write_bytes(b"\xac\xed\x00\x05 QuPath data")
    return root


def _bracs_answer(label: str, points: list[tuple[float, float]]) -> str:
    option = "ABCDEFG"[["N", "PB", "UDH", "FEA", "ADH", "DCIS", "IC"].index(label)]
    locs = [{"x": x, "y": y} for x, y in points]
    return json.dumps({"selected_option": option, "wsi_label": label, "confidence": 0.9, "localizations": locs})


def test_bracs_dcis_sure_roi_hit_scores_strict_1(bracs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("copilot.adapters.bracs.default_qpdata_reader", lambda: None)
    report = adapt_bracs(bracs / "BRACS_WSI", tmp_path / "packs")
    dcis = tmp_path / "packs" / "BRACS_1234"
    truth = _truth(dcis)
    assert truth["label"] == "DCIS" and truth["evidence_scorable"] and truth["rois_of_label"] == 1
    assert truth["annotation_source"].endswith("BRACS_1234.qpdata.geojson")
    hit = score_case(dcis, _bracs_answer("DCIS", [(300.0, 200.0)]))
    assert (hit.task, hit.strict, hit.loc) == (1.0, 1.0, 1.0)
    assert score_case(dcis, perfect_response(dcis)).strict == 1.0
    in_udh = score_case(dcis, _bracs_answer("DCIS", [(600.0, 400.0)]))  # inside the UDH-sure ROI only
    assert (in_udh.strict, in_udh.loc) == (0.0, 0.0)
    adh = score_case(tmp_path / "packs" / "BRACS_1235", _bracs_answer("ADH", [(300.0, 200.0)]))
    assert adh.strict == 1.0  # the `BRACS_<id>.geojson` name and `ADH-sure`
    assert open_session(dcis)._viewer.state()["dimensions"] == [768, 512]
    assert report.summary() == "bracs: 4 cases written; 0 skipped; 0 duplicates removed; unscorable: evidence 1"


def test_bracs_qpdata_without_quPath_is_evidence_unscorable(
    bracs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("copilot.adapters.bracs.default_qpdata_reader", lambda: None)  # as without QuPath
    adapt_bracs(bracs / "BRACS_WSI", tmp_path / "packs")
    ic = tmp_path / "packs" / "BRACS_1236"
    truth = _truth(ic)
    assert truth["evidence_scorable"] is False and "export_bracs_geojson.groovy" in truth["evidence_note"]
    right = score_case(ic, _bracs_answer("IC", []))
    assert (right.task, right.strict, right.loc) == (1.0, 1.0, None)  # scored on the answer, not in Loc
    assert right.details["evidence"][0]["kind"] == "not_applicable"
    assert score_case(ic, _bracs_answer("DCIS", [])).strict == 0.0
    normal = score_case(tmp_path / "packs" / "BRACS_1237", _bracs_answer("N", []))
    assert (normal.strict, normal.loc) == (1.0, None)


def test_bracs_qpdata_read_through_a_reader(bracs: Path, tmp_path: Path) -> None:
    read = []

    def reader(path: Path) -> list[Annotation]:  # stands in for paquo (QuPath is not installed here)
        read.append(path.name)
        return [Annotation("Malignant-sure", DCIS_ROI)]

    adapt_bracs(bracs / "BRACS_WSI", tmp_path / "packs", qpdata_reader=reader)
    assert read == ["BRACS_1236.qpdata"]
    ic = tmp_path / "packs" / "BRACS_1236"
    assert _truth(ic)["evidence_scorable"] is True
    assert score_case(ic, _bracs_answer("IC", [(300.0, 200.0)])).strict == 1.0


def test_qpdata_reader_is_found_only_with_quPath() -> None:
    from copilot.adapters.bracs import default_qpdata_reader
    from qupath_ext.qpdata import paquo_available, read_qpdata

    assert default_qpdata_reader() is (read_qpdata if paquo_available() else None)


def test_qpdata_hierarchy_to_annotations() -> None:
    from types import SimpleNamespace as NS

    from qupath_ext.qpdata import hierarchy_annotations

    ring = [(200, 100), (400, 100), (400, 300), (200, 300), (200, 100)]  # a RectangleROI as paquo gives it
    rect = NS(geom_type="Polygon", exterior=NS(coords=ring), interiors=[])
    point = NS(geom_type="Point")
    hierarchy = NS(annotations=[NS(path_class=NS(name="DCIS-sure"), roi=rect), NS(path_class=None, roi=point)])
    (ann,) = hierarchy_annotations(hierarchy)
    assert ann.cls == "DCIS-sure" and ann.contains(300, 200) and ann.exterior.shape == (4, 2)


def test_bracs_class_names() -> None:
    names = {"DCIS-sure": "DCIS", "ADH-sure": "ADH", "Malignant-sure": "IC", "Pathological-benign": "PB",
             "Pathologica benign": "PB", "Benign-sure": "N", "UDH-sure": "UDH", "FEA-sure": "FEA", "DCIS": "DCIS",
             "DCIS-non": None, "Tumor": None}  # fmt: skip
    assert {n: bracs_label(n) for n in names} == names


# --- CAMELYON17 ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def camelyon(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """training/center_N slides, lesion_annotations/ for one positive slide, stage_labels.csv rows as released."""
    root = tmp_path_factory.mktemp("c17") / "training"
    img = np.full((400, 600, 3), 230, np.uint8)
    for center, name in ((0, "patient_004_node_4"), (0, "patient_004_node_1"), (1, "patient_012_node_0")):
        write_pyramid(root / f"center_{center}" / f"{name}.tif", img, 0.24, downsamples=(1, 4))
    tumour = Annotation("Tumor", np.array([[100, 100], [300, 100], [300, 250], [100, 250]], float))
    (root / "lesion_annotations").mkdir()
    write_asap_xml(root / "lesion_annotations" / "patient_004_node_4.xml", [tumour])
    rows = [["patient_004.zip", "pN0(i+)"], ["patient_004_node_0.tif", "negative"],
            ["patient_004_node_1.tif", "negative"], ["patient_004_node_4.tif", "itc"],
            ["patient_012.zip", "pN1"], ["patient_012_node_0.tif", "macro"],
            ["patient_012_node_0.tif", "macro"]]  # fmt: skip
    _write_csv(root / "stage_labels.csv", ["patient", "stage"], rows)
    return root


def test_camelyon17_positive_without_xml_is_kept(camelyon: Path, tmp_path: Path) -> None:
    report = adapt_camelyon17(camelyon, tmp_path / "packs")
    assert sorted(p.name for p in report.cases) == ["patient_004_node_1", "patient_004_node_4", "patient_012_node_0"]
    assert report.skipped_ids == {"slide not in the download": ["patient_004_node_0"]}
    assert report.summary() == (
        "camelyon17: 3 cases written; 1 skipped (slide not in the download 1); 1 duplicates removed; "
        "unscorable: evidence 1"
    )
    no_xml = tmp_path / "packs" / "patient_012_node_0"
    truth = _truth(no_xml)
    assert truth["largest_metastasis"] == "macro" and truth["evidence_scorable"] is False
    answer = {"tumor_presence": "tumor_present", "largest_metastasis": "macro", "localizations": []}
    right = score_case(no_xml, json.dumps(answer))
    assert (right.task, right.strict, right.loc) == (1.0, 1.0, None)
    assert score_case(no_xml, json.dumps({**answer, "largest_metastasis": "micro"})).strict == 0.0
    with_xml = tmp_path / "packs" / "patient_004_node_4"
    scores = [score_case(with_xml, perfect_response(with_xml)), right]
    assert scores[0].strict == 1.0 and summarise(scores)["lymph_node_wsi"]["loc"] == 1.0  # Loc over 1 slide
    assert load_case(with_xml).kind == "pathology"


def test_adapt_command_prints_the_summary(camelyon: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = ["cases", "adapt", "--dataset", "camelyon17", "--src", str(camelyon), "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("camelyon17: 3 cases written; 1 skipped")
    assert json.loads((tmp_path / "o" / "adapt_camelyon17.json").read_text())["duplicates"] == 1
