"""The fast slice renderer draws what the previous (Pillow-affine) one drew, within one grey level, on a real MRI
(the MNI T1 template): axis-aligned, flipped and permuted voxel axes, anisotropic voxels, oblique planes, zoom,
pan, outside-volume pixels and fusion; corner text is pixel-identical; oblique planes by the compiled kernel are
SimpleITK's within one grey level with the same black pixels; traces name their renderer and older traces (naming
none, or the SimpleITK oblique route) replay with the renderer they were drawn with; a call's images are encoded
once."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from PIL import Image, ImageDraw

import copilot.session as session_module
from benchmarks.render import rotated  # the benchmark's oblique acquisition: the same volume tested and timed
from copilot.cases.brain import TEMPLATE_FILES, template_dir
from copilot.cases.pack import load_case
from copilot.engine.png import PNG_ENCODER
from copilot.engine.volume import trilinear
from copilot.engine.volume.display import LUTS, to_uint8
from copilot.engine.volume.image import Volume, volume_from_sitk, volume_to_sitk
from copilot.engine.volume.render import (
    ITK_RENDERER,
    KERNEL_RENDERER,
    LEGACY_RENDERER,
    RENDERER,
    _blend,
    _coloured,
    _fusion_table,
    check_renderer,
    draw_corners,
    overlay_font,
)
from copilot.engine.volume.reslice import reslice_uint8
from copilot.engine.volume.sampling import slice_uint8
from copilot.engine.volume.viewer import EmbeddedVolumeViewer
from copilot.replay import replay
from copilot.runtime import new_session, open_session, session_header
from copilot.trace.recorder import TRACE_FILE, TraceRecorder
from tests.conftest import RunningServer, older_trace

SIZES = [(512, 512), (300, 200)]


@pytest.fixture(scope="module")
def t1() -> Volume:
    return volume_from_sitk(sitk.ReadImage(str(template_dir() / TEMPLATE_FILES["t1"]), sitk.sitkFloat32), "T1")


def _reoriented(t1: Volume) -> Volume:
    """The same anatomy stored with permuted, flipped voxel axes and anisotropic spacing (0.8 × 1.1 × 2.5 mm)."""
    data = t1.data[::3, ::-1, :].transpose(1, 0, 2)  # [k, j, i] → slices along A–P, rows flipped
    m = np.zeros((4, 4))
    m[3, 3] = 1.0
    m[:3, 0] = [-0.8, 0.0, 0.0]  # i: towards L
    m[:3, 1] = [0.0, 0.0, -2.5]  # j: towards I
    m[:3, 2] = [0.0, 1.1, 0.0]  # k: towards A
    m[:3, 3] = [80.0, -120.0, 70.0]
    return Volume("T1_reoriented", data, m)


def _views(volume: Volume, size: tuple[int, int]) -> list[tuple[np.ndarray, float, float]]:
    """(image→RAS, window, level) of the three views at several offsets, fitted, zoomed in, panned, zoomed out."""
    viewer = EmbeddedVolumeViewer()
    vid = viewer.add_volume(volume)
    viewer.recover_standard_views(vid)
    d = viewer.display(vid)
    out = []
    for view in ("red", "yellow", "green"):
        lo, hi = viewer.slice_offset_range(view)
        for zoom in (1.0, 1.7, 0.6):
            if zoom != 1.0:
                viewer.zoom(view, zoom, viewer.view(view).center + np.array([7.3, -5.1, 3.7]))
            for offset in np.linspace(lo, hi, 4):
                viewer.set_slice_offset(view, float(offset))
                out.append((viewer.view(view).image_to_ras_matrix(size), d.window, d.level))
            viewer.fit(view)
    return out


def _assert_close(volume: Volume, size: tuple[int, int], window_shift: float = 0.0) -> None:
    for m, window, level in _views(volume, size):
        level += window_shift
        old = reslice_uint8(volume, m, size, window, level).astype(int)
        new = slice_uint8(volume, m, size, window, level).astype(int)
        assert new.shape == old.shape == (size[1], size[0])
        assert np.abs(new - old).max() <= 1


@pytest.mark.parametrize("size", SIZES)
def test_axis_aligned_views_match_the_previous_renderer(t1: Volume, size: tuple[int, int]) -> None:
    _assert_close(t1, size)


@pytest.mark.parametrize("size", SIZES)
def test_flipped_permuted_anisotropic_voxels_match(t1: Volume, size: tuple[int, int]) -> None:
    _assert_close(_reoriented(t1), size)


def test_oblique_planes_match(t1: Volume) -> None:
    _assert_close(rotated(t1, 0.35, 0.26), (512, 512))
    _assert_close(rotated(_reoriented(t1), -0.2, 0.5), (300, 200))


OBLIQUE = [(0.35, 0.26, False), (-0.2, 0.5, True), (1.2, -0.7, False), (0.02, 0.0, False), (0.0, 0.3, True)]


@pytest.mark.parametrize(("a", "b", "reoriented"), OBLIQUE)
def test_oblique_kernel_gives_the_itk_pixels_within_one_grey_level(
    t1: Volume, a: float, b: float, reoriented: bool
) -> None:
    """Steep, shallow (0.02 rad) and single-axis rotations, stored voxel axes permuted or not: within one grey level
    of SimpleITK's cropped `Resample`, black in exactly the pixels the previous renderer left black. Where pixel
    centres land on the volume's border (single-axis rotations), the kernel keeps the half-open rule of every other
    route, [−½, n − ½), where ITK's cropped grid rounds either way."""
    volume = rotated(_reoriented(t1) if reoriented else t1, a, b)
    size = (300, 200) if reoriented else (512, 512)
    low = float(volume.data.min())
    for m, window, level in _views(volume, size):
        new = slice_uint8(volume, m, size, window, level, "kernel").astype(int)
        old = slice_uint8(volume, m, size, window, level, "itk").astype(int)
        assert np.abs(new - old).max() <= 1
        outside_new = slice_uint8(volume, m, size, 100.0, low + 40.0, "kernel") == 0
        assert np.array_equal(outside_new, reslice_uint8(volume, m, size, 100.0, low + 40.0) == 0)


def test_oblique_kernel_bands_give_the_same_pixels(t1: Volume, monkeypatch: pytest.MonkeyPatch) -> None:
    """The footprint cut into one, two or four bands of rows sampled on threads: the same bytes."""
    volume = rotated(t1, 0.35, 0.26)
    views = _views(volume, (512, 512))[::5]
    images = []
    for bands in (1, 2, 4):
        monkeypatch.setattr(trilinear, "_BANDS", bands)
        images.append([slice_uint8(volume, m, (512, 512), w, lvl) for m, w, lvl in views])
    for other in images[1:]:
        assert all(np.array_equal(x, y) for x, y in zip(images[0], other, strict=True))


def test_without_numba_the_itk_route_draws_and_the_kernel_renderer_is_refused(
    t1: Volume, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = rotated(t1, 0.35, 0.26)
    m, window, level = _views(volume, (256, 256))[1]
    monkeypatch.setattr(trilinear, "available", lambda: False)
    fallback = slice_uint8(volume, m, (256, 256), window, level)
    assert np.array_equal(fallback, slice_uint8(volume, m, (256, 256), window, level, "itk"))
    with pytest.raises(ValueError, match="numba"):
        check_renderer(KERNEL_RENDERER)
    assert check_renderer(ITK_RENDERER) == ITK_RENDERER


def test_outside_the_volume_is_black_in_the_same_pixels(t1: Volume) -> None:
    """With a window below every voxel value, black marks exactly the pixels outside the volume."""
    for volume in (t1, _reoriented(t1), rotated(t1, 0.35, 0.26)):
        low = float(volume.data.min())
        outside_somewhere = False
        for m, _, _ in _views(volume, (512, 512)):
            old = reslice_uint8(volume, m, (512, 512), 100.0, low + 40.0)
            new = slice_uint8(volume, m, (512, 512), 100.0, low + 40.0)
            assert np.array_equal(old == 0, new == 0)
            outside_somewhere |= bool((new == 0).any()) and bool((new > 0).any())
        assert outside_somewhere


def test_pixels_on_voxel_centres_are_the_windowed_voxels(t1: Volume) -> None:
    """Zoom 1 and a whole-voxel pan: the image is the windowed slab itself, cut where the volume ends."""
    k, r, c = 90, -20, 30  # 20 pixel rows above the volume, 30 columns in
    image_to_ijk = np.array([[1.0, 0, 0, c - 0.5], [0, 1.0, 0, r - 0.5], [0, 0, 1.0, k], [0, 0, 0, 1.0]])
    m = t1.ijk_to_ras @ image_to_ijk
    new = slice_uint8(t1, m, (256, 300), 400.0, 300.0)
    expected = np.zeros((300, 256), dtype=np.uint8)
    rows = t1.data[k, :, c : c + 256]
    expected[-r : -r + rows.shape[0], : rows.shape[1]] = to_uint8(rows, 400.0, 300.0)
    assert np.array_equal(new, expected)
    assert np.array_equal(new, reslice_uint8(t1, m, (256, 300), 400.0, 300.0))


def _fusion_viewer(t1: Volume) -> tuple[EmbeddedVolumeViewer, str, str]:
    viewer = EmbeddedVolumeViewer()
    ct = viewer.add_volume(Volume("CT", t1.data * 2.0 - 500.0, t1.ijk_to_ras, modality="CT"))
    pet = viewer.add_volume(Volume("PET", np.clip(t1.data - 60.0, 0, None) / 20.0, t1.ijk_to_ras, modality="PT"))
    viewer.recover_standard_views(ct)
    return viewer, ct, pet


@pytest.mark.parametrize("mode", ["blend", "add"])
def test_fused_views_match_within_one_step_of_the_colour_table(t1: Volume, mode: str) -> None:
    """Each layer within one grey level; through PET-Heat one grey level is at most one step of its table."""
    viewer, ct, pet = _fusion_viewer(t1)
    step = int(np.abs(np.diff(LUTS["pet_heat"].astype(int), axis=0)).max())
    for opacity in (0.5, 0.3):
        viewer.set_fusion(ct, pet, opacity, mode)
        for view in ("red", "yellow", "green"):
            viewer.renderer = LEGACY_RENDERER
            old = np.asarray(viewer.render(view, (512, 512))).astype(int)
            viewer.renderer = RENDERER
            new = np.asarray(viewer.render(view, (512, 512))).astype(int)
            assert new.shape == old.shape == (512, 512, 3)
            assert np.abs(new - old).max() <= int(np.ceil(step * opacity + 1 + 1))


FUSIONS = [
    ("grey", "pet_heat", "blend"),
    ("grey", "pet_heat", "add"),
    ("pet_heat", "grey", "blend"),
    ("grey", "grey", "add"),
]


@pytest.mark.parametrize(("bg_map", "fg_map", "mode"), FUSIONS)
def test_fusion_table_is_the_pillow_blend_itself(bg_map: str, fg_map: str, mode: str) -> None:
    rng = np.random.default_rng(3)
    bg = rng.integers(0, 256, (64, 96), dtype=np.uint8)
    fg = rng.integers(0, 256, (64, 96), dtype=np.uint8)
    expected = _blend(_coloured(Image.fromarray(bg), bg_map), _coloured(Image.fromarray(fg), fg_map), 0.37, mode)
    rgbx = _fusion_table(bg_map, fg_map, 0.37, mode).take((bg.astype(np.uint16) << 8) | fg)
    got = rgbx.view(np.uint8).reshape(64, 96, 4)[..., :3]
    assert np.array_equal(got, np.asarray(expected))


@pytest.mark.parametrize("mode", ["L", "RGB"])
@pytest.mark.parametrize("size", [(512, 512), (301, 203), (97, 700)])
def test_corner_text_is_pixel_identical_to_imagedraw(mode: str, size: tuple[int, int]) -> None:
    corners = {"tl": ["Red  axial", "S: 12.3mm"], "tr": ["W: 1400  L: -500"], "bl": ["B: T1", "F: PET (50%)"],
               "br": ["x"]}  # fmt: skip
    fill = 90 if mode == "L" else (90, 20, 200)
    expected, got = Image.new(mode, size, fill), Image.new(mode, size, fill)
    w, h = size
    px = max(9, min(18, round(min(w, h) / 28)))
    font, draw = overlay_font(px), ImageDraw.Draw(expected)
    ink, shadow = (255, 0) if mode == "L" else ((255, 255, 255), (0, 0, 0))
    for corner, lines in corners.items():
        for n, text in enumerate(lines):
            x = 3 if corner[1] == "l" else w - 3 - draw.textlength(text, font=font)
            y = 3 + n * (px + 2) if corner[0] == "t" else h - 3 - (len(lines) - n) * (px + 2)
            draw.text((x + 1, y + 1), text, fill=shadow, font=font)
            draw.text((x, y), text, fill=ink, font=font)
    for _ in range(2):  # drawn from cached masks the second time
        draw_corners(got, corners)
        assert np.array_equal(np.asarray(got), np.asarray(expected))
        got = Image.new(mode, size, fill)


def test_traces_name_their_renderer_and_old_traces_replay(brain_case: Path, tmp_path: Path) -> None:
    assert session_header(load_case(brain_case), "A")["renderer"] == RENDERER
    calls = [("set_slice_offset", {"view": "red", "offset": 10.3, "size": 256}),
             ("zoom", {"view": "green", "factor": 1.6, "size": 300})]  # fmt: skip
    older_trace(brain_case, tmp_path / "old", "renderer", calls, renderer=LEGACY_RENDERER)
    report = replay(tmp_path / "old")
    assert report.ok, report.summary()

    lines = (tmp_path / "old" / TRACE_FILE).read_text().splitlines()
    head = {k: v for k, v in json.loads(lines[0]).items() if k not in ("seq", "prev", "hash", "type")}
    new_head = {**head, "renderer": RENDERER}  # the same calls drawn by the current renderer do not verify
    shifted = TraceRecorder(tmp_path / "relabelled", new_head)
    for line in lines[1:]:
        event = json.loads(line)
        if event["type"] == "handler_call":
            (tmp_path / "relabelled" / "artifacts").mkdir(exist_ok=True)
            for im in event.get("images", []):
                (tmp_path / "relabelled" / im["artifact"]).write_bytes((tmp_path / "old" / im["artifact"]).read_bytes())
            shifted.record("handler_call", {k: v for k, v in event.items() if k not in ("seq", "prev", "hash", "type",
                                                                                         "time")})  # fmt: skip
    shifted.close()
    mismatch = replay(tmp_path / "relabelled")
    assert not mismatch.ok and "image of view" in mismatch.summary()

    bad = TraceRecorder(tmp_path / "bad", {**head, "renderer": "future-renderer"})
    bad.close()
    refused = replay(tmp_path / "bad")
    assert not refused.ok and "unknown slice renderer 'future-renderer'" in refused.summary()


def test_new_traces_replay(brain_case: Path, tmp_path: Path) -> None:
    session = open_session(brain_case, trace_dir=tmp_path / "new")
    assert session.call("observe", {"view": "all", "size": 300}).ok
    assert session.call("zoom", {"view": "red", "factor": 2.0, "size": 200}).ok
    session.close()
    report = replay(tmp_path / "new")
    assert report.ok, report.summary()


def test_a_call_encodes_each_image_once_for_trace_and_http(
    brain_case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = open_session(brain_case, trace_dir=tmp_path / "trace")
    encoded: list[int] = []
    real = session_module.encode_png

    def counting(image: Image.Image, encoder: str) -> bytes:
        encoded.append(1)
        return real(image, encoder)

    monkeypatch.setattr(session_module, "encode_png", counting)
    srv = RunningServer(session)
    try:
        reply = srv.client.call("observe", {"view": "all", "size": 256})
    finally:
        srv.stop()
    assert reply.ok and len(reply.images()) == 3 and len(encoded) == 3
    event = session.trace_events()[-1]
    for (view, data), rec in zip(reply.images(), event["images"], strict=True):
        assert view == rec["view"]
        assert data == (tmp_path / "trace" / rec["artifact"]).read_bytes()  # the very bytes the client received
    assert all(base64.b64decode(im["data_base64"]) for im in reply.body["images"])


@pytest.mark.parametrize("renderer", [ITK_RENDERER, KERNEL_RENDERER])
def test_oblique_traces_replay_with_the_renderer_they_name(t1: Volume, tmp_path: Path, renderer: str) -> None:
    """A scene whose views cut the voxels obliquely, recorded by either renderer of oblique planes, replays."""
    case = tmp_path / "case"
    case.mkdir()
    small = Volume("oblique", t1.data[::2, ::2, ::2], t1.ijk_to_ras @ np.diag([2.0, 2.0, 2.0, 1.0]))
    sitk.WriteImage(volume_to_sitk(rotated(small, 0.35, 0.26)), str(case / "oblique.nii.gz"))
    header = {"kind": "radiology", "backend": "embedded", "case_root": str(case), "case_inputs": {}, "track": "A",
              "png_encoder": PNG_ENCODER, "renderer": renderer}  # fmt: skip
    session = new_session("radiology", trace=TraceRecorder(tmp_path / "trace", header), case_root=case,
                          case_inputs={}, renderer=renderer)  # fmt: skip
    assert session.call("open_case", {"dicom_dir": "oblique.nii.gz"}, actor="system").ok
    assert session.call("observe", {"view": "all", "size": 256}).ok
    assert session.call("set_slice_offset", {"view": "green", "offset": 7.3, "size": 200}).ok
    session.close()
    report = replay(tmp_path / "trace")
    assert report.ok, report.summary()
