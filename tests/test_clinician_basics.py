"""The radiologist's and pathologist's basics: orientation letters (axial, sagittal, coronal, oblique) and the 3D
marker, the value under the cursor (HU, SUVbw worked by hand, stored values), the series picker's facts (no
patient identifier) and `--series`, 4D images one frame at a time, benchmark answers in words, the 3D preset
that fits the series, the slide readout in µm and overview click-to-go; then the same in the window
(offscreen)."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid

from copilot.engine.geometry import SliceView
from copilot.engine.slide.viewer import Viewport
from copilot.engine.volume.image import Volume
from copilot.engine.volume.loading import load_volume
from copilot.engine.volume.suv import suv_factor, volume_suv_factor
from copilot.errors import HandlerError
from copilot.panel.answer_words import answer_in_words
from copilot.panel.orientation import direction_letters, edge_letters, marker_axes
from copilot.panel.probe import readout, slide_readout, value_text, voxel_value
from copilot.panel.screen import Screen
from copilot.panel.studies import (
    StudyError,
    dicom_series,
    open_study,
    select_series,
    select_series_list,
    study_for,
)

IDENTIFIERS = {
    "PatientName": "DOE^JANE",
    "PatientID": "PID-7734",
    "PatientBirthDate": "19610412",
    "AccessionNumber": "ACC-55021",
    "InstitutionName": "Saint Elsewhere Hospital",
    "ReferringPhysicianName": "HOUSE^GREGORY",
}
F18_HALF_LIFE = 6586.2  # s (109.77 min)
PET_STORAGE, CT_STORAGE = "1.2.840.10008.5.1.4.1.1.128", "1.2.840.10008.5.1.4.1.1.2"


def write_series(
    folder: Path, modality: str, stored: np.ndarray, *, slope: float = 1.0, intercept: float = 0.0,
    number: int = 1, description: str = "", uid: str | None = None, extra: dict | None = None,
) -> str:  # fmt: skip
    """One file per slice ([k, j, i] unsigned 16-bit), 2 mm voxels, axial, with patient identifiers in every file."""
    folder.mkdir(parents=True, exist_ok=True)
    uid = uid or generate_uid()
    for k in range(stored.shape[0]):
        ds = Dataset()
        ds.file_meta = FileMetaDataset()
        ds.file_meta.MediaStorageSOPClassUID = PET_STORAGE if modality == "PT" else CT_STORAGE
        ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
        ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds.SOPClassUID = ds.file_meta.MediaStorageSOPClassUID
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
        ds.Modality, ds.SeriesInstanceUID, ds.StudyInstanceUID = modality, uid, "1.2.826.0.1.3680043.2.1125.900"
        ds.SeriesNumber, ds.SeriesDescription, ds.InstanceNumber = number, description, k + 1
        ds.SeriesDate, ds.SeriesTime = "20240102", "110000"
        for key, value in IDENTIFIERS.items():
            setattr(ds, key, value)
        ds.ImagePositionPatient = [0.0, 0.0, 2.0 * k]
        ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
        ds.PixelSpacing, ds.SliceThickness = [2.0, 2.0], 2.0
        ds.Rows, ds.Columns = stored.shape[1:]
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 0
        ds.RescaleSlope, ds.RescaleIntercept = slope, intercept
        for key, value in (extra or {}).items():
            setattr(ds, key, value)
        ds.PixelData = stored[k].astype(np.uint16).tobytes()
        ds.save_as(folder / f"{number:02d}_{uid.rsplit('.', 1)[-1]}_{k:03d}.dcm", enforce_file_format=True)
    return uid


def pet_tags(**changes: object) -> dict:
    drug = Dataset()
    drug.RadionuclideTotalDose = 370e6  # Bq
    drug.RadionuclideHalfLife = F18_HALF_LIFE
    drug.RadiopharmaceuticalStartTime = "100000"  # injected at 10:00, series at 11:00
    tags = {"Units": "BQML", "DecayCorrection": "START", "PatientWeight": 70,
            "RadiopharmaceuticalInformationSequence": [drug]}  # fmt: skip
    tags.update(changes)
    return tags


# ----- orientation letters -----
def _letters(orientation: str) -> dict[str, str]:
    view = SliceView("v", orientation, np.array([0.0, 0.0, 0.0]), (200.0, 200.0))
    return edge_letters(view.image_to_ras_matrix((400, 300)))


def test_orientation_letters_of_the_three_standard_views() -> None:
    # radiological convention: the patient's right on the screen's left; anterior up in axial, superior up
    # in sagittal and coronal; the nose to the left in sagittal (Slicer's sagittal SliceToRAS)
    assert _letters("axial") == {"left": "R", "right": "L", "top": "A", "bottom": "P"}
    assert _letters("sagittal") == {"left": "A", "right": "P", "top": "S", "bottom": "I"}
    assert _letters("coronal") == {"left": "R", "right": "L", "top": "S", "bottom": "I"}


def test_orientation_letters_of_an_oblique_view() -> None:
    axial = SliceView("v", "axial", np.zeros(3), (200.0, 200.0)).image_to_ras_matrix((300, 300))
    a = math.radians(30)
    about_s = np.array([[math.cos(a), -math.sin(a), 0, 0], [math.sin(a), math.cos(a), 0, 0], [0, 0, 1, 0],
                        [0, 0, 0, 1]])  # fmt: skip
    letters = edge_letters(about_s @ axial)
    # screen right = L rotated 30° towards P: (−cos30, −sin30, 0): mostly L, then P
    assert letters == {"left": "RA", "right": "LP", "top": "AL", "bottom": "PR"}
    tilted = np.array([0.2, 0.05, -0.97])  # a slight tilt below 10° names only the major axis
    assert direction_letters(tilted) == "IR" and direction_letters([0.1, 0.05, -0.99]) == "I"
    assert direction_letters([0, 0, 0]) == ""


def test_orientation_marker_axes() -> None:
    # seen from the front (eye anterior, superior up): the patient's right on the viewer's left, S up, A at us
    axes = {letter: (x, y, depth) for letter, x, y, depth in marker_axes(np.array([0, 1.0, 0]), np.array([0, 0, 1.0]))}
    assert axes["R"] == pytest.approx((-1.0, 0.0, 0.0))
    assert axes["S"] == pytest.approx((0.0, -1.0, 0.0))
    assert axes["A"] == pytest.approx((0.0, 0.0, 1.0))


# ----- the value under the cursor -----
def test_ct_values_read_in_hounsfield_units(tmp_path: Path) -> None:
    stored = np.full((3, 8, 8), 24, dtype=np.uint16)  # 24 × 1 − 1024 = −1000 HU: air
    stored[1, 2, 5] = 1064  # 1064 − 1024 = 40 HU: soft tissue
    write_series(tmp_path / "ct", "CT", stored, slope=1.0, intercept=-1024.0, description="Thorax")
    ct = load_volume(tmp_path / "ct")
    inside = ct.ijk_to_ras_point([5, 2, 1])
    assert value_text(ct, voxel_value(ct, inside)) == "40 HU"
    assert value_text(ct, voxel_value(ct, ct.ijk_to_ras_point([0, 0, 0]))) == "-1000 HU"
    assert voxel_value(ct, [500.0, 0.0, 0.0]) is None
    line = readout(inside.tolist(), [("B", ct)])
    assert line.startswith(f"R {inside[0]:.1f}  A {inside[1]:.1f}  S {inside[2]:.1f} mm") and "B: Thorax 40 HU" in line
    assert "outside" in readout([500.0, 0.0, 0.0], [("B", ct)])


def test_pet_values_read_as_suv_computed_by_hand(tmp_path: Path) -> None:
    stored = np.full((3, 8, 8), 100, dtype=np.uint16)
    stored[1, 4, 4] = 20000  # × slope 0.5 = 10000 Bq/ml
    write_series(tmp_path / "pet", "PT", stored, slope=0.5, description="PET WB", extra=pet_tags())
    pet = load_volume(tmp_path / "pet")
    value = voxel_value(pet, pet.ijk_to_ras_point([4, 4, 1]))
    assert value == pytest.approx(10000.0)
    # 370 MBq injected at 10:00, series at 11:00: 370e6 · 2^(−3600 / 6586.2) = 253.4 MBq at the scan;
    # SUVbw = 10000 Bq/ml · 70000 g / 253.4e6 Bq = 2.763
    by_hand = 10000.0 * 70000.0 / (370e6 * 2 ** (-3600.0 / 6586.2))
    assert by_hand == pytest.approx(2.7634, abs=1e-4)
    assert value_text(pet, value) == f"SUVbw {by_hand:.2f} (10000 Bq/ml)" == "SUVbw 2.76 (10000 Bq/ml)"
    # the factor comes from the inputs the loader kept with the volume, as the file states them
    assert float(pet.metadata["PatientWeight"]) == 70 and float(pet.metadata["RadionuclideTotalDose"]) == 370e6
    assert volume_suv_factor(pet)[0] == pytest.approx(by_hand / 10000.0)


def test_suv_rules_for_decay_correction_units_and_missing_tags(tmp_path: Path) -> None:
    def ds(**changes: object) -> Dataset:
        out = Dataset()
        out.Modality, out.SeriesDate, out.SeriesTime = "PT", "20240102", "110000"
        for key, value in pet_tags(**changes).items():
            setattr(out, key, value)
        return out

    factor, _ = suv_factor(ds())
    assert factor == pytest.approx(70000.0 / (370e6 * 2 ** (-3600.0 / F18_HALF_LIFE)))
    factor, _ = suv_factor(ds(DecayCorrection="ADMIN"))  # already decay-corrected to the injection
    assert factor == pytest.approx(70000.0 / 370e6)
    assert suv_factor(ds(Units="GML")) == (1.0, "")
    assert suv_factor(ds(Units="CNTS")) == (None, "units CNTS without the Philips SUV scale factor (7053,1000)")
    assert suv_factor(ds(PatientWeight=0)) == (None, "no patient weight")
    late = ds(SeriesTime="003000")  # injected 23:30 the day before, scanned 00:30: one hour, not minus 23
    late.RadiopharmaceuticalInformationSequence[0].RadiopharmaceuticalStartTime = "233000"
    assert suv_factor(late)[0] == pytest.approx(factor * 2 ** (3600.0 / F18_HALF_LIFE))
    with_dt = ds()
    with_dt.RadiopharmaceuticalInformationSequence[0].RadiopharmaceuticalStartDateTime = "20240102093000.000000"
    assert suv_factor(with_dt)[0] == pytest.approx(70000.0 / (370e6 * 2 ** (-5400.0 / F18_HALF_LIFE)))
    # a PET without the inputs shows its stored value and says why there is no SUV
    stored = np.full((2, 6, 6), 300, dtype=np.uint16)
    write_series(tmp_path / "pet", "PT", stored, extra={"Units": "BQML"})
    pet = load_volume(tmp_path / "pet")
    assert value_text(pet, 300.0) == "300 Bq/ml (no SUV: no patient weight)"


def test_other_volumes_read_as_stored() -> None:
    mr = Volume("T2", np.full((2, 3, 4), 412.25, dtype=np.float32), np.eye(4), "MR")
    assert value_text(mr, 412.25) == "412.2" and value_text(mr, 1234.0) == "1234"


# ----- the series picker and --series -----
@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DICOM folder: three look-alike one-image localizers (#1), a CT (#2) and a PET (#3), identifiers in all."""
    folder = tmp_path_factory.mktemp("picker") / "exam"
    one = np.full((1, 8, 8), 50, dtype=np.uint16)
    for n in range(3):
        write_series(folder, "MR", one, number=1, description="FAST LOCALIZER", uid=f"1.2.826.0.1.3680043.2.1125.7{n}1")
    ct = np.full((4, 10, 10), 1024, dtype=np.uint16)
    ct[1:3, 3:7, 3:7] = 1064
    write_series(folder, "CT", ct, intercept=-1024.0, number=2, description="Thorax 1.0 B31f",
                 uid="1.2.826.0.1.3680043.2.1125.802")  # fmt: skip
    pet = np.full((4, 10, 10), 100, dtype=np.uint16)
    write_series(folder, "PT", pet, slope=0.5, number=3, description="PET WB AC", uid="1.2.826.0.1.3680043.2.1125.903",
                 extra=pet_tags())  # fmt: skip
    return folder


def test_series_picker_tells_look_alikes_apart_without_identifiers(study: Path) -> None:
    found = dicom_series(study)
    titles = [s.title for s in found]
    assert len(set(titles)) == 5  # three "#1 MR FAST LOCALIZER" series, each its own line
    assert titles[0] == "#1 FAST LOCALIZER · MR · 1 image · 2024-01-02 11:00 · UID …25.701"
    assert titles[3] == "#2 Thorax 1.0 B31f · CT · 4 images · 2024-01-02 11:00 · UID …25.802"
    for text in titles:
        for identifier in IDENTIFIERS.values():
            assert identifier.split("^")[0].lower() not in text.lower()
    assert "DOE" not in study_for(study, found[3]).case_id


def test_series_picker_on_pydicoms_shipped_files() -> None:
    from pydicom.data import get_testdata_file

    folder = Path(get_testdata_file("dicomdirtests/DICOMDIR")).parent
    titles = [s.title for s in dicom_series(folder)]
    localizers = [t for t in titles if t.startswith("#1 FAST LOCALIZER")]
    assert len(localizers) == 3 and len(set(localizers)) == 3  # once three identical lines
    assert localizers[0] == "#1 FAST LOCALIZER · MR · 1 image · 2003-05-05 02:51 · UID …0.134"
    assert "#2 Routine Brain · CT · 4 images · 1995-09-03 17:33 · UID …19.0.2" in titles


def test_series_option_picks_by_number_uid_end_or_description(study: Path) -> None:
    found = dicom_series(study)
    assert select_series(found, "2").description == "Thorax 1.0 B31f"
    assert select_series(found, "pet").modality == "PT"
    assert select_series(found, "721").uid.endswith(".721")
    assert select_series(found, "…25.711").uid.endswith(".711")
    with pytest.raises(StudyError, match=r"matches 3 series.*give the end of the UID"):
        select_series(found, "1")
    with pytest.raises(StudyError, match="matches no series; series: #1 FAST"):
        select_series(found, "knee")


def test_several_series_open_together_and_read_both_values(study: Path) -> None:
    found = dicom_series(study)
    ct, pet = select_series_list(found, "Thorax,3")
    with pytest.raises(StudyError, match="twice"):
        select_series_list(found, "2,Thorax")
    opened = study_for(study, [ct, pet])
    assert opened.case_id == "exam — #2 Thorax 1.0 B31f + #3 PET WB AC"
    session = open_study(opened)
    ids = {v["name"]: v["id"] for v in session.snapshot()["volumes"]}
    assert list(ids) == ["Thorax 1.0 B31f", "PET WB AC"] and session.snapshot()["background_volume"] == ids[
        "Thorax 1.0 B31f"]  # fmt: skip
    screen = Screen(session)
    args = {"background_volume_ref": ids["Thorax 1.0 B31f"], "foreground_volume_ref": ids["PET WB AC"],
            "foreground_opacity": 0.4}  # fmt: skip
    assert session.call("fusion", args).ok
    point = session.scene_data()["volume"].ijk_to_ras_point([5, 5, 1]).tolist()
    suv = 50.0 * 70000.0 / (370e6 * 2 ** (-3600.0 / F18_HALF_LIFE))  # 100 stored × slope 0.5 = 50 Bq/ml
    assert screen.readout(point).endswith(f"B: Thorax 1.0 B31f 40 HU   F: PET WB AC SUVbw {suv:.2f} (50 Bq/ml)")
    assert "B:" not in screen.readout(point, pane_volume=ids["PET WB AC"])  # a side-by-side pane of another volume


@pytest.mark.gui
def test_gui_series_option_never_waits_on_a_dialog(qtbot, study: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    from copilot.cli import main

    monkeypatch.setenv("MEDCOPILOT_RECENT", str(tmp_path / "r.json"))
    shot = tmp_path / "petct.png"
    args = ["gui", str(study), "--series", "Thorax,3", "--fusion", "PET WB AC", "--cursor", "10,-10,2",
            "--screenshot", str(shot)]  # fmt: skip
    assert main(args) == 0  # no picker: the command line chose the series
    assert shot.stat().st_size > 10000 and capsys.readouterr().out.strip() == str(shot)
    without = tmp_path / "first.png"
    assert main(["gui", str(study), "--screenshot", str(without)]) == 0  # no --series: the first, and a hint
    assert "5 series; opened #1 FAST LOCALIZER" in capsys.readouterr().err


@pytest.mark.gui
def test_gui_series_option_that_names_no_series_fails_with_the_list(qtbot, study: Path, tmp_path: Path, capsys,
                                                                     monkeypatch) -> None:  # fmt: skip
    from copilot.gui.app import main

    monkeypatch.setenv("MEDCOPILOT_RECENT", str(tmp_path / "r.json"))
    assert main(str(study), screenshot=str(tmp_path / "x.png"), series="knee") == 2
    err = capsys.readouterr().err
    assert "matches no series; series: #1 FAST LOCALIZER" in err and "DOE" not in err and "PID" not in err
    assert not (tmp_path / "x.png").exists()


# ----- 4D images -----
@pytest.fixture(scope="module")
def four_d(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4D NIfTI of 4 frames, 6×5×3 voxels, frame t filled with 10·t + 1."""
    data = np.stack([np.full((3, 5, 6), 10.0 * t + 1, dtype=np.float32) for t in range(4)])
    image = sitk.GetImageFromArray(data, isVector=False)
    image.SetSpacing((2.0, 2.0, 3.0, 1.0))
    path = tmp_path_factory.mktemp("fourd") / "perfusion.nii.gz"
    sitk.WriteImage(image, str(path))
    return path


def test_4d_image_opens_one_frame_with_the_frame_in_the_state(four_d: Path) -> None:
    session = open_study(study_for(four_d))
    state = session.snapshot()
    assert state["volumes"][0] | {"id": ""} == {"id": "", "name": state["volumes"][0]["name"], "frame": 0,
                                                 "frames": 4}  # fmt: skip
    screen = Screen(session)
    assert screen.frames() == (0, 4)
    centre = [float(v) for v in session.scene_data()["volume"].center_ras()]
    assert screen.readout(centre).endswith(" 1")
    later = open_study(study_for(four_d, frame=2))
    assert Screen(later).frames() == (2, 4) and later.scene_data()["volume"].data.max() == 21.0
    inventory = later.call("get_viewer_state", {"include_volumes": True})
    assert inventory.ok
    with pytest.raises(HandlerError, match="frame 4 does not exist"):
        open_study(study_for(four_d, frame=4))


# ----- answers in words -----
def test_benchmark_answers_in_words() -> None:
    assert answer_in_words("Ring enhancement, necrosis.\nANSWER: A", "brain_mri") == ["Diagnosis: Glioblastoma (A)"]
    lung = answer_in_words("rationale …\n1C2D3B4A5B", "lung_petct")
    assert lung == ["Tumor location: Right lower lobe (1C)", "Pathological T stage: T4 (2D)",
                    "Pathological N stage: N1 (3B)", "Histology: Adenocarcinoma (4A)",
                    "Histopathological grade: G2 Moderately differentiated (5B)"]  # fmt: skip
    fields = "\n".join(f"{k}: {'YES' if k == 'NEW_TARGET_LESION' else 'NO'}" for k in (
        "NON_MEASURABLE_LESION", "T2_PROGRESSION", "CURRENT_TARGET_LESION", "NEW_TARGET_LESION",
        "CURRENT_NON_TARGET_LESION", "NEW_NON_TARGET_LESION"))  # fmt: skip
    assert answer_in_words(fields + "\nANSWER: A", "longitudinal_mri") == [
        "RANO response: Progressive disease (PD, option A)", "Present: new target lesion"]  # fmt: skip
    bracs = '{"wsi_label": "DCIS", "selected_option": "F", "localizations": [{"x": 10, "y": 20}]}'
    assert answer_in_words(bracs, "breast_wsi") == ["Slide label: Ductal carcinoma in situ (DCIS)",
                                                    "1 location marked on the slide"]  # fmt: skip
    cam = '{"tumor_presence": "tumor_present", "largest_metastasis": "micro", "localizations": []}'
    assert answer_in_words(cam, "lymph_node_wsi") == ["Tumour: Tumour present", "Largest metastasis: Micrometastasis",
                                                      "0 locations marked on the slide"]  # fmt: skip
    assert answer_in_words("ANSWER: Z", "brain_mri") == ["answer not readable: answer 'Z' is not one of A/B/C/D/E/F"]
    assert answer_in_words("A free answer about the study.", "") == []


def test_3d_preset_fits_the_series() -> None:
    from copilot.gui.scene3d import default_preset  # VTK, imported when the test runs

    assert default_preset("PT") == "pet_mip"
    assert default_preset("CT") == "ct_soft_tissue"
    assert default_preset("CT", "Thorax LUNG 1.0") == "ct_lung"
    assert default_preset("CT", "", "ct_bone") == "ct_bone"
    assert default_preset("MR", "T1 lung") == "mr_default"


def test_slide_readout_in_micrometres_and_overview_target() -> None:
    assert slide_readout(100.0, 50.0, [0.25, 0.25], (2000, 1000)) == (
        "x 100  y 50 px (level 0)   25.0 µm, 12.5 µm (0.250 µm/px)")  # fmt: skip
    assert slide_readout(100.0, 50.0, None, (2000, 1000)) == "x 100  y 50 px (level 0)"
    assert "outside" in slide_readout(-5.0, 50.0, None, (2000, 1000))


# ----- the window (offscreen) -----
def _window(qtbot, path: Path, **kw: object):
    pytest.importorskip("pytestqt")
    from copilot.gui.app import MainWindow
    from copilot.panel.studies import RecentStudies

    window = MainWindow()
    window.quiet = True
    window.recent = RecentStudies(Path(tempfile.mkdtemp()) / "recent.json")
    qtbot.addWidget(window)
    window.resize(1300, 800)
    window.show()
    qtbot.waitExposed(window)
    messages: list[str] = []
    shown = window.progress
    window.progress = lambda text: (messages.append(text), shown(text))  # type: ignore[method-assign]
    assert window.open_path(path, **kw)
    qtbot.waitUntil(lambda: all(p.frame is not None for p in window.panes.values() if p.pane != "3d"), timeout=10000)
    return window, messages


def _grab(widget) -> np.ndarray:
    image = widget.grab().toImage().convertToFormat(widget.grab().toImage().Format.Format_RGB888)
    w, h = image.width(), image.height()
    rows = np.frombuffer(image.constBits(), dtype=np.uint8).reshape(h, image.bytesPerLine())
    return rows[:, : 3 * w].reshape(h, w, 3)


@pytest.mark.gui
def test_window_selectors_letters_and_value_under_the_cursor(qtbot, study: Path) -> None:
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtGui import QMouseEvent

    window, messages = _window(qtbot, study, series_spec="2")
    assert messages[0].startswith("Reading the DICOM headers") and messages[-1].startswith("Opening #2 Thorax")
    assert not window.busy_label.isVisible()
    assert window.windowTitle().endswith("#2 Thorax 1.0 B31f")
    # letters at the edges of the axial pane: R on the left, in the letter colour, over the picture
    red = window.panes["red"]
    shown = _grab(red)
    h = shown.shape[0]
    band = shown[h // 2 - 12 : h // 2 + 12, 4:24].reshape(-1, 3).astype(int)
    assert (np.abs(band - [255, 235, 150]).max(axis=1) < 40).sum() > 10
    # the value under the cursor: the soft-tissue block reads 40 HU
    session = window.model.session
    ct = session.scene_data()["volume"]
    ras = ct.ijk_to_ras_point([5, 5, 1])
    window.model.jump(ras.tolist())
    qtbot.waitUntil(lambda: red.frame is not None and abs(window.screen_path.view("red").offset - ras[2]) < 1e-6)
    x, y = np.linalg.inv(red.frame.image_to_ras)[:2] @ np.append(ras, 1.0)
    r = red.devicePixelRatioF()
    event = QMouseEvent(QMouseEvent.Type.MouseMove, QPointF(x / r, y / r), QPointF(x / r, y / r),
                        Qt.MouseButton.NoButton, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)  # fmt: skip
    red.mouseMoveEvent(event)
    assert "B: Thorax 1.0 B31f 40 HU" in window.readout.text()
    # W/L preset and background selectors are audited calls, and the boxes follow the scene
    window.set_wl_preset("ct_lung")
    assert session.snapshot()["display"][session.snapshot()["background_volume"]]["preset"] == "ct_lung"
    qtbot.waitUntil(lambda: window.wl_box.currentData() == "ct_lung")
    assert window.model.timeline[-1].handler == "window_preset" and window.model.timeline[-1].actor == "clinician"
    assert [window.background_box.itemText(i) for i in range(window.background_box.count())] == ["Thorax 1.0 B31f"]
    assert not any(a.isVisible() for a in window.frame_actions)
    # the 3D view: the preset that fits the series and its window; the R/A/S marker in its lower left corner
    window.set_layout("four_up")
    qtbot.waitUntil(lambda: window.panes["3d"].isVisible())
    window.render_3d_now()
    assert window.scene3d.preset == "ct_lung"  # a CT read in the lung window renders with the lung preset
    view3d = _grab(window.panes["3d"])
    corner = view3d[-90:, :90].reshape(-1, 3).astype(int)
    for colour in ([235, 80, 80], [90, 200, 90], [90, 140, 255]):  # R, A, S
        assert (np.abs(corner - colour).max(axis=1) < 30).sum() > 5, colour


@pytest.mark.gui
def test_window_frame_selector_and_answer_in_words(qtbot, four_d: Path) -> None:
    window, messages = _window(qtbot, four_d)
    assert messages == ["Opening perfusion.nii.gz…"]
    assert all(a.isVisible() for a in window.frame_actions) and window.frame_box.maximum() == 3
    window.model.act("set_slice_offset", {"view": "yellow", "offset": -2.0, "size": 64})
    window.frame_box.setValue(3)
    qtbot.waitUntil(lambda: window.screen_path.frames() == (3, 4))
    assert window.model.session.scene_data()["volume"].data.max() == 31.0
    assert window.screen_path.view("yellow").offset == pytest.approx(-2.0)  # the place is kept across frames
    # a benchmark module's answer reads in words in the panel
    window.model.case = type("Case", (), {"module": "brain_mri", "case_id": "c"})()
    window.model.messages.append(("agent", "Necrotic rim.\nANSWER: A"))
    window.panel.refresh()
    assert window.panel.answer.text() == "Diagnosis: Glioblastoma (A)" and not window.panel.answer.isHidden()


@pytest.mark.gui
def test_slide_overview_click_goes_there(qtbot, tmp_path: Path) -> None:
    from PySide6.QtCore import QPoint, Qt

    from copilot.medflow import make_cases

    case = make_cases("breast_wsi", 1, 2, tmp_path / "cases", slide_size=(1024, 768), mpp=2.0)[0]
    window, _ = _window(qtbot, next((case / "images").iterdir()))
    pane = window.panes["viewer"]
    window.model.act("zoom", {"direction": "in", "amount": 4, "unit": "factor"})
    qtbot.waitUntil(lambda: pane.frame is not None and pane.frame.viewport.downsample < 1.0)
    vp: Viewport = pane.frame.viewport
    from copilot.panel.screen import overview_rect

    x0, y0, x1, y1 = overview_rect((1024, 768), vp)
    target = (x0 + 0.25 * (x1 - x0), y0 + 0.75 * (y1 - y0))  # a quarter across, three quarters down
    r = pane.devicePixelRatioF()
    qtbot.mouseClick(pane, Qt.MouseButton.LeftButton, pos=QPoint(round(target[0] / r), round(target[1] / r)))
    centre = window.model.session.snapshot()["center"]
    assert centre == pytest.approx([256.0, 576.0], abs=8.0)
    assert window.model.timeline[-1].handler == "center_on_wsi_coordinate"
    assert "µm" in window.screen_path.slide_readout(100.0, 100.0)


def test_case_pack_written_as_a_dicom_study_reads_back_hu_and_suv(tmp_path: Path) -> None:
    from copilot.cases.dicom_study import write_dicom_study
    from tests.workstation_data import petct_case_pack

    case = petct_case_pack(tmp_path / "case", origin=(-10.0, 20.0, -30.0))
    out = write_dicom_study(case, tmp_path / "dicom")
    found = dicom_series(out)
    assert [s.title.split(" · UID")[0] for s in found] == ["#2 CT chest · CT · 5 images · 2024-03-15 10:00",
                                                           "#3 PET AC · PT · 5 images · 2024-03-15 10:00"]  # fmt: skip
    ct_vol, pet_vol = load_volume(found[0].folder), load_volume(found[1].folder)
    point = ct_vol.ijk_to_ras_point([5, 5, 2])
    assert point.tolist() == pytest.approx([-(-10.0 + 10.0), -(20.0 + 12.5), -30.0 + 6.0])  # LPS → RAS
    assert value_text(ct_vol, voxel_value(ct_vol, point)) == "45 HU"
    assert value_text(pet_vol, voxel_value(pet_vol, point)).startswith("SUVbw 7.50 (")


@pytest.mark.gui
def test_series_dialog_lists_facts_and_opens_several(qtbot, study: Path) -> None:
    pytest.importorskip("pytestqt")
    from PySide6.QtCore import QItemSelectionModel

    from copilot.gui.series_dialog import SeriesDialog

    found = dicom_series(study)
    dialog = SeriesDialog(found)
    qtbot.addWidget(dialog)
    lines = [dialog.list.item(i).text() for i in range(dialog.list.count())]
    assert lines == [s.title for s in found] and not any("DOE" in line or "PID" in line for line in lines)
    assert [s.number for s in dialog.chosen()] == [1]  # the first is preselected
    dialog.list.setCurrentRow(4, QItemSelectionModel.SelectionFlag.ClearAndSelect)
    dialog.list.setCurrentRow(3, QItemSelectionModel.SelectionFlag.Select)
    assert [s.description for s in dialog.chosen()] == ["Thorax 1.0 B31f", "PET WB AC"]  # the folder's order
