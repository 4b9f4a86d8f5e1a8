"""Track B operators: registration recovers a known rigid transform, region growing matches a lesion mask,
operators never modify inputs, and refused operations leave the scene as it was."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from copilot.cases.brain import TEMPLATE_FILES, make_brain_case, template_dir
from copilot.engine.geometry import LPS_TO_RAS
from copilot.engine.volume.image import volume_from_sitk
from copilot.engine.volume.loading import load_volume
from copilot.engine.volume.viewer import EmbeddedVolumeViewer
from copilot.session import Session
from copilot.tools import RADIOLOGY
from tests.dicom_validator import assert_valid_dicom
from tests.oracle import deep_voxel


def _session_b(*volumes) -> Session:
    viewer = EmbeddedVolumeViewer()
    ids = [viewer.add_volume(v) for v in volumes]
    viewer.recover_standard_views(ids[0])
    return Session(viewer, RADIOLOGY, track="B")


def _digest(session: Session) -> dict[str, str]:
    v = session._viewer
    return {vid: hashlib.sha256(v.volume(vid).data.tobytes()).hexdigest() for vid in v.volume_ids()}


@pytest.fixture(scope="module")
def brain_pair() -> tuple:
    """The MNI T1 at 2 mm (an eighth of the 1 mm voxels: the same anatomy, quicker to register) and a copy moved by
    a known rigid transform S (7° about S, 4° about R, 9 mm)."""
    full = sitk.ReadImage(str(template_dir() / TEMPLATE_FILES["t1"]), sitk.sitkFloat32)
    size = [round(n * s / 2.0) for n, s in zip(full.GetSize(), full.GetSpacing(), strict=True)]
    fixed_img = sitk.Resample(
        sitk.SmoothingRecursiveGaussian(full, 0.8), size, sitk.Transform(), sitk.sitkLinear, full.GetOrigin(),
        (2.0, 2.0, 2.0), full.GetDirection(), 0.0, sitk.sitkFloat32,
    )  # fmt: skip
    s = sitk.Euler3DTransform()
    s.SetCenter(fixed_img.TransformContinuousIndexToPhysicalPoint([(n - 1) / 2 for n in fixed_img.GetSize()]))
    s.SetRotation(np.deg2rad(4.0), 0.0, np.deg2rad(7.0))
    s.SetTranslation((6.0, -5.0, 4.5))  # |t| ≈ 9.0 mm
    moving_img = sitk.Resample(fixed_img, fixed_img, s, sitk.sitkLinear, 0.0)  # M(y) = F(S(y))
    return volume_from_sitk(fixed_img, "T1_fixed"), volume_from_sitk(moving_img, "T1_moved"), s


def test_registration_recovers_a_known_rigid_transform(brain_pair) -> None:
    fixed, moving, s = brain_pair
    session = _session_b(fixed, moving)
    before = _digest(session)
    t0 = time.perf_counter()
    out = session.call(
        "register_volumes",
        {"fixed_volume": "T1_fixed", "moving_volume": "T1_moved", "output_transform": "T1 to fixed", "size": 256},
    )
    seconds = time.perf_counter() - t0
    assert out.ok, out.error
    assert [im.label for im in out.images] == ["fused fixed/registered", "checkerboard fixed/registered"]
    # expected: T = S⁻¹ (fixed RAS → moving RAS), since F(x) = M(S⁻¹(x))
    m = np.array(out.result["matrix_ras"])
    inv = s.GetInverse()
    brain = np.argwhere(fixed.data > 0.3 * fixed.data.max())[::50][:, ::-1].astype(float)
    ras = brain @ fixed.ijk_to_ras[:3, :3].T + fixed.ijk_to_ras[:3, 3]
    expected = np.array([LPS_TO_RAS @ np.array(inv.TransformPoint(tuple(LPS_TO_RAS @ p))) for p in ras])
    got = ras @ m[:3, :3].T + m[:3, 3]
    tre = np.linalg.norm(got - expected, axis=1).mean()
    print(f"registration: mean TRE {tre:.3f} mm over {len(ras)} brain points in {seconds:.1f} s")
    assert tre < 1.0
    assert _digest(session) == before  # inputs untouched
    applied = session.call(
        "apply_transform", {"volume": "T1_moved", "transform": "T1 to fixed", "output_volume": "T1_moved registered"}
    )
    assert applied.ok and _digest(session) == {
        **before,
        applied.result["volume_id"]: _digest(session)[applied.result["volume_id"]],
    }
    # the misbinding the paper's failure analysis describes is refused, and changes nothing
    state = json.dumps(session.snapshot(), sort_keys=True)
    wrong = session.call("apply_transform", {"volume": "T1_fixed", "transform": "T1 to fixed", "output_volume": "x"})
    assert wrong.error["code"] == "wrong_layer" and json.dumps(session.snapshot(), sort_keys=True) == state
    taken = session.call(
        "apply_transform", {"volume": "T1_moved", "transform": "T1 to fixed", "output_volume": "T1_fixed"}
    )
    assert taken.error["code"] == "name_taken" and json.dumps(session.snapshot(), sort_keys=True) == state
    stale = session.call(
        "apply_transform", {"volume": "T1_moved", "transform": "vtkMRMLLinearTransformNode99", "output_volume": "y"}
    )
    assert stale.error["code"] == "unknown_transform"


def test_grow_from_seeds_matches_the_lesion(tmp_path: Path) -> None:
    case = make_brain_case(tmp_path, "bB", 31, spacing=2.0, label="B")
    mask = load_volume(case / "hidden" / "mask.nii.gz")
    seed = mask.ijk_to_ras_point(np.array(deep_voxel(mask), dtype=float))
    session = _session_b(load_volume(case / "images" / "FLAIR.nii.gz"))
    before = _digest(session)
    out = session.call(
        "segment_grow_from_seeds",
        {"volume": "FLAIR", "output_segment": "lesion", "seeds_ras": [seed.tolist()], "size": 128},
    )
    assert out.ok, out.error
    grown = session._viewer.segment("lesion")[1].mask.data > 0
    truth = mask.data > 0
    dice = 2 * (grown & truth).sum() / (grown.sum() + truth.sum())
    print(f"grow from seeds: Dice {dice:.3f}")
    assert dice >= 0.9
    assert _digest(session) == before
    # the outline is drawn in the views (segment colour present)
    rgb = np.asarray(
        __import__("PIL.Image", fromlist=["Image"]).open(__import__("io").BytesIO(out.images[0].data)).convert("RGB")
    )
    assert ((rgb[..., 0] == 255) & (rgb[..., 1] == 64) & (rgb[..., 2] == 64)).sum() > 10
    stats = session.call("segment_statistics", {"segment": "lesion"}).result
    assert stats["voxels"] == int(grown.sum()) and stats["volume_mm3"] == pytest.approx(grown.sum() * 8.0)
    lo, hi = stats["extent_ras"]["S"]
    assert lo <= seed[2] <= hi and stats["intensity"]["FLAIR"]["mean"] > 0
    again = session.call("segment_threshold", {"volume": "FLAIR", "output_segment": "lesion", "lower": 0, "upper": 1})
    assert again.error["code"] == "name_taken"
    none = session.call("segment_threshold", {"volume": "FLAIR", "output_segment": "t", "lower": 1e5, "upper": 2e5})
    assert none.error["code"] == "empty_segment" and len(session.snapshot()["segments"]) == 1


def test_operators_are_track_b_only(brain_case: Path) -> None:
    from copilot.runtime import open_session

    session = open_session(brain_case)  # track A
    out = session.call("segment_threshold", {"volume": "FLAIR", "output_segment": "s", "lower": 0, "upper": 1})
    assert out.status == 403 and out.error["code"] == "not_in_track"


def test_dicom_import_and_seg_export_round_trip(tmp_path: Path) -> None:
    import highdicom as hd
    import pydicom

    from copilot.runtime import open_session
    from tests.test_adapters import _dicom_series, _nifti

    case = tmp_path / "case"
    _nifti(case / "images" / "T1.nii.gz", np.zeros((4, 5, 6), np.float32))
    (case / "case.json").write_text(
        json.dumps({"case_id": "d", "module": "brain_mri", "inputs": {"volumes": ["images/T1.nii.gz"]}})
    )
    series = _dicom_series(case / "images" / "ct_series", 5, "CT", 0.0, 2.5)
    session = open_session(case, track="B", trace_dir=tmp_path / "trace", allow_store=(str(tmp_path),))
    imported = session.call("import_dicom", {"path": "images/ct_series"})
    assert imported.ok, imported.error
    entry = imported.result["imported"][0]
    assert entry["name"] == "ct_series" and entry["series"]["SeriesInstanceUID"] == series[0].SeriesInstanceUID
    assert [v["name"] for v in session._viewer.inventory()] == ["T1", "ct_series"]
    vol = session._viewer.volume(entry["id"])
    hi = float(np.percentile(vol.data, 90))
    assert session.call(
        "segment_threshold", {"volume": "ct_series", "output_segment": "bright", "lower": hi, "upper": 1e6, "size": 96}
    ).ok
    out = session.call("export_dicom_seg", {"segment": "bright", "output_name": "bright_seg"})
    assert out.ok, out.error
    assert_valid_dicom(tmp_path / "trace" / "derived" / "bright_seg.dcm")
    seg = hd.seg.segread(tmp_path / "trace" / "derived" / "bright_seg.dcm")
    assert str(seg.FrameOfReferenceUID) == str(series[0].FrameOfReferenceUID) == out.result["frame_of_reference_uid"]
    assert seg.ReferencedSeriesSequence[0].SeriesInstanceUID == series[0].SeriesInstanceUID
    files = sorted((case / "images" / "ct_series").iterdir())
    import SimpleITK as sitk

    ordered = sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(case / "images" / "ct_series"))
    uids = [pydicom.dcmread(f, stop_before_pixels=True).SOPInstanceUID for f in ordered]
    back = seg.get_pixels_by_source_instance(uids, segment_numbers=[1], combine_segments=True)
    assert len(files) == 5 and np.array_equal(np.asarray(back) > 0, vol.data >= hi)  # same voxels, same geometry
    again = session.call("export_dicom_seg", {"segment": "bright", "output_name": "bright_seg"})
    assert again.error["code"] == "name_taken"
    t1 = session.call("segment_threshold", {"volume": "T1", "output_segment": "z", "lower": -1, "upper": 1})
    assert t1.ok and session.call("export_dicom_seg", {"segment": "z", "output_name": "z"}).error["code"] == "not_dicom"


def test_operators_run_as_jobs_with_progress_and_cancel(brain_pair, tmp_path: Path) -> None:
    """Over HTTP: a registration job reports progress and can be cancelled (nothing changes); another completes."""
    from tests.conftest import RunningServer

    fixed, moving, _ = brain_pair
    session = _session_b(fixed, moving)
    srv = RunningServer(session)
    try:
        state = json.dumps(session.snapshot(), sort_keys=True)
        args = {
            "fixed_volume": "T1_fixed",
            "moving_volume": "T1_moved",
            "output_transform": "tx",
            "max_iterations": 300,
        }
        started = srv.client.request("POST", "/medcopilot/v1/jobs/register_volumes", args)
        assert started.status == 202 and started.body["status"] in ("queued", "running")
        job = started.body["job_id"]
        deadline = time.time() + 60
        while (
            srv.client.request("GET", f"/medcopilot/v1/jobs/{job}").body["progress"] <= 0.0 and time.time() < deadline
        ):
            time.sleep(0.02)
        polled = srv.client.request("GET", f"/medcopilot/v1/jobs/{job}").body
        assert polled["status"] == "running" and polled["message"].startswith("level")
        # the server answers while the job runs (handler calls queue behind it: one consistent state)
        assert len(srv.client.handlers()) == len(RADIOLOGY.specs("B"))
        assert srv.client.request("DELETE", f"/medcopilot/v1/jobs/{job}").status == 202
        while srv.client.request("GET", f"/medcopilot/v1/jobs/{job}").body["status"] == "running":
            time.sleep(0.05)
        final = srv.client.request("GET", f"/medcopilot/v1/jobs/{job}").body
        assert final["status"] == "cancelled" and final["response"]["error"]["code"] == "cancelled"
        assert json.dumps(session.snapshot(), sort_keys=True) == state
        quick = srv.client.request(
            "POST",
            "/medcopilot/v1/jobs/segment_threshold",
            {"volume": "T1_fixed", "output_segment": "bright", "lower": 100, "upper": 1e6, "size": 64},
        )
        jid = quick.body["job_id"]
        while srv.client.request("GET", f"/medcopilot/v1/jobs/{jid}").body["status"] in ("queued", "running"):
            time.sleep(0.02)
        done = srv.client.request("GET", f"/medcopilot/v1/jobs/{jid}").body
        assert done["status"] == "done" and done["progress"] == 1.0 and done["response"]["ok"]
        assert srv.client.request("GET", "/medcopilot/v1/jobs/job-999").status == 404
        assert srv.client.request("POST", "/medcopilot/v1/jobs/nope", {}).status == 404
    finally:
        srv.stop()
