"""Handler contract, run on every radiology backend (the embedded engine and the `slicer` backend on
Slicer's MRML libraries), in-process and over HTTP: good calls work, bad calls are refused with a clear
error and leave the state snapshot byte-identical (and, on the slicer backend, the MRML scene itself)."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from copilot.tools import RADIOLOGY
from tests.conftest import BACKENDS, canonical_state

ON_EVERY_BACKEND = pytest.mark.parametrize("backend", BACKENDS, indirect=True)
UNKNOWN_ID = "vtkMRMLScalarVolumeNode999999"
FIRST_ID = "<id of the first volume>"  # replaced by the backend's own node id

LONG = "x" * 300
# (handler, arguments, expected error code)
BAD_CALLS: list[tuple[str, object, str]] = [
    ("ping", {"unexpected": 1}, "invalid_arguments"),
    ("open_case", {"dicom_dir": "../../etc"}, "path_outside_case"),
    ("open_case", {"dicom_dir": "/etc/passwd"}, "path_outside_case"),
    ("open_case", {"dicom_dir": "hidden/mask.nii.gz"}, "path_outside_case"),
    ("open_case", {"dicom_dir": "hidden"}, "path_outside_case"),
    ("open_case", {"dicom_dir": "images/../hidden/truth.json"}, "path_outside_case"),
    ("open_case", {"dicom_dir": "images/missing.nii.gz"}, "not_found"),
    ("open_case", {"dicom_dir": "case.json"}, "load_failed"),
    ("open_case", {"size": 100000}, "invalid_arguments"),
    ("select_volume", {"volume_name": "NOPE"}, "unknown_volume"),
    ("select_volume", {"volume_id": UNKNOWN_ID}, "unknown_volume"),
    ("select_volume", {}, "invalid_arguments"),
    ("select_volume", {"volume_id": FIRST_ID, "volume_name": "FLAIR"}, "invalid_arguments"),
    ("observe", {"size": 10**6}, "invalid_arguments"),
    ("observe", {"view": "purple"}, "invalid_arguments"),
    ("scroll", {"view": "red", "num_slices": 0}, "invalid_arguments"),
    ("scroll", {"view": "red", "direction": "sideways"}, "invalid_arguments"),
    ("scroll", {"view": "red", "step": float("nan")}, "invalid_arguments"),
    ("zoom", {"view": "red", "factor": 0}, "invalid_arguments"),
    ("zoom", {"view": "red", "factor": 1e-5}, "invalid_arguments"),
    ("zoom", {"view": "red", "factor": 2, "center_1000": [500, 1200]}, "invalid_arguments"),
    ("fit", {"view": "blue"}, "invalid_arguments"),
    ("set_slice_offset", {"view": "red", "offset": 1e6}, "offset_out_of_range"),
    ("set_slice_offset", {"view": "green", "offset": -1e6}, "offset_out_of_range"),
    ("set_slice_offset", {"view": "red", "offset": float("nan")}, "invalid_arguments"),
    ("set_slice_offset", {"view": "red", "offset": float("inf")}, "invalid_arguments"),
    ("set_slice_offset", {"view": "red", "offset": "12"}, "invalid_arguments"),
    ("set_slice_offset", {"view": "red"}, "invalid_arguments"),
    ("get_slice_offset_range", {"view": "top"}, "invalid_arguments"),
    ("recover_standard_views", {"volume_name": "NOPE"}, "unknown_volume"),
    ("image_coords_to_ras", {"view": "red", "point_1000": [1, 2], "bbox_1000": [1, 2, 3, 4]}, "invalid_arguments"),
    ("image_coords_to_ras", {"view": "red"}, "invalid_arguments"),
    ("image_coords_to_ras", {"view": "red", "point_1000": [1000, 20]}, "invalid_arguments"),
    ("image_coords_to_ras", {"view": "red", "bbox_1000": [600, 600, 500, 500]}, "invalid_arguments"),
    ("image_coords_to_ras", {"view": "red", "point_1000": [float("nan"), 3]}, "invalid_arguments"),
    ("get_viewer_state", {"include_volumes": "yes"}, "invalid_arguments"),
    ("wl", {"window": -5, "level": 10}, "invalid_arguments"),
    ("wl", {"window": 100}, "invalid_arguments"),
    ("wl", {"auto": True, "window": 100, "level": 3}, "invalid_arguments"),
    ("wl", {"window": 100, "level": 3, "volume_id": "nope"}, "unknown_volume"),
    ("window_preset", {"preset": "ct_liver"}, "invalid_arguments"),
    ("window_preset", {"preset": "ct_lung", "volume_name": "NOPE"}, "unknown_volume"),
    ("jump", {"ras": [1e6, 0, 0]}, "out_of_volume"),
    ("jump", {"ras": [1, 2]}, "invalid_arguments"),
    ("jump", {"ras": [float("nan"), 0, 0]}, "invalid_arguments"),
    ("set_layout", {"layout": "bogus"}, "invalid_arguments"),
    ("fusion", {"background_volume_ref": "FLAIR", "foreground_volume_ref": "FLAIR"}, "invalid_arguments"),
    ("fusion", {"background_volume_ref": "FLAIR", "foreground_volume_ref": "PET"}, "unknown_volume"),
    ("fusion", {"background_volume_ref": "T1", "foreground_volume_ref": "FLAIR", "foreground_opacity": 2},
     "invalid_arguments"),
    ("bookmark_view", {"label": LONG}, "invalid_arguments"),
    ("record_key_slice", {"view": "red", "offset": 1e6}, "offset_out_of_range"),
    ("record_point", {"ras": [1e5, 0, 0]}, "out_of_volume"),
    ("record_point", {"ras": [0, 0, 0], "point_1000": [1, 1]}, "invalid_arguments"),
    ("record_point", {}, "invalid_arguments"),
    ("measure_distance", {"point_a_1000": [1, 1]}, "invalid_arguments"),
    ("probe_value", {"ras": [1e5, 0, 0]}, "out_of_volume"),
    ("probe_value", {"ras": [0, 0]}, "invalid_arguments"),
    ("region_stats", {"shape": "sphere", "center_ras": [0, 0, 0]}, "invalid_arguments"),
    ("region_stats", {"shape": "box", "center_ras": [1e5, 0, 0], "size_mm": [5, 5, 5]}, "empty_region"),
    ("region_stats", {"shape": "segment"}, "invalid_arguments"),
    ("record_measurement", {"shape": "point"}, "invalid_arguments"),
    ("measure_bidirectional", {"long_a": [0, 0, 0], "long_b": [0, 0, 0], "short_a": [0, 0, 0], "short_b": [0, 1, 0]},
     "invalid_arguments"),
    ("measure_angle", {"ras_a": [1, 0, 0], "vertex": [1, 0, 0], "ras_b": [0, 1, 0]}, "invalid_arguments"),
    ("measure_ellipse", {"center_ras": [1e5, 0, 0], "radius_x_mm": 2, "radius_y_mm": 2}, "empty_region"),
    ("record_measurement", {"shape": "sphere", "center_ras": [1e5, 0, 0], "radius_mm": 2}, "empty_region"),
    ("no_such_handler", {}, "unknown_handler"),
    ("observe", ["not", "an", "object"], "invalid_arguments"),
]  # fmt: skip


def test_every_handler_has_bad_argument_cases() -> None:
    assert {s.name for s in RADIOLOGY.specs("A")} <= {name for name, _, _ in BAD_CALLS}


@ON_EVERY_BACKEND
@pytest.mark.parametrize(("name", "args", "code"), BAD_CALLS, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(BAD_CALLS)])
def test_bad_call_is_refused_and_changes_nothing(client, name: str, args: object, code: str) -> None:
    # move away from defaults first so that an accidental reset would show
    assert client.call("set_slice_offset", {"view": "red", "offset": 4.0, "size": 96}).ok
    assert client.call("zoom", {"view": "green", "factor": 1.7, "size": 96}).ok
    before = canonical_state(client)
    if isinstance(args, dict) and FIRST_ID in args.values():
        first = client.state()["volumes"][0]["id"]
        args = {k: first if v == FIRST_ID else v for k, v in args.items()}
    reply = client.call(name, args)  # type: ignore[arg-type]
    assert not reply.ok
    assert reply.error_code == code, reply.body
    assert reply.body["error"]["message"]
    assert reply.status == (404 if code == "unknown_handler" else 422)
    assert canonical_state(client) == before


@ON_EVERY_BACKEND
def test_good_calls_return_views_and_state(client) -> None:
    reply = client.call("observe", {"view": "all", "size": 128, "include_metadata": True})
    assert reply.ok
    views = reply.images()
    assert [v for v, _ in views] == ["red", "yellow", "green"]
    for _, data in views:
        assert Image.open(io.BytesIO(data)).size == (128, 128)
    names = [v["name"] for v in reply.result["inventory"]]
    assert names == ["T1", "T1c", "T2", "FLAIR"]
    assert reply.state["active_volume_name"] == "FLAIR"
    rng = client.call("get_slice_offset_range", {"view": "red"}).result
    out = client.call("set_slice_offset", {"view": "red", "offset": rng["min"], "size": 96})
    assert out.ok and out.state["views"]["red"]["offset"] == pytest.approx(rng["min"])
    pt = client.call("image_coords_to_ras", {"view": "red", "bbox_1000": [400, 400, 600, 600]})
    assert pt.ok and pt.result["ras"][2] == pytest.approx(rng["min"])
    assert set(pt.result) >= {"ras", "ijk", "view", "volume"}


@ON_EVERY_BACKEND
def test_open_case_inside_root_works(client) -> None:
    reply = client.call("open_case", {"dicom_dir": "images/T2.nii.gz", "slice_planes": ["axial"], "size": 96})
    assert reply.ok, reply.body
    assert [v for v, _ in reply.images()] == ["red"]
    assert [v["name"] for v in reply.result["inventory"]] == ["T2"]
    again = client.call("open_case", {"view_layout": "one_up_red", "size": 96})
    assert again.ok and again.state["layout"] == "one_up_red"
    assert len(again.result["inventory"]) == 4


@ON_EVERY_BACKEND
def test_scroll_keyframes_and_cine(client) -> None:
    start = client.call("get_slice_offset_range", {"view": "red"}).result
    reply = client.call("scroll", {"view": "red", "direction": "up", "num_slices": 12, "size": 96})
    assert reply.ok
    assert len(reply.images()) == 6
    assert reply.result["to_offset"] == pytest.approx(start["current"] + 12 * start["step"])
    cine = client.call("scroll", {"view": "red", "direction": "down", "num_slices": 5, "output": "cine", "size": 64})
    assert cine.ok and cine.body["images"][0]["mime"] == "image/apng"
    frames = Image.open(io.BytesIO(cine.images()[0][1]))
    assert getattr(frames, "n_frames", 1) == 5
    far = client.call("scroll", {"view": "red", "direction": "up", "num_slices": 1000, "output": "final", "size": 64})
    assert far.ok and far.result["clamped"] and far.result["to_offset"] == pytest.approx(start["max"])
