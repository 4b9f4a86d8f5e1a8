"""Hostile files: references that leave the case, images built to exhaust memory or loop a parser, and broken
DICOM geometry are refused by name, quickly, and the server keeps answering meanwhile."""

from __future__ import annotations

import gzip
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from copilot.runtime import open_session
from copilot.server.client import RemoteViewer
from tests.conftest import RunningServer


@pytest.fixture
def case(brain_case: Path, tmp_path: Path) -> Path:
    """A private copy of the brain case, free to receive hostile files."""
    return Path(shutil.copytree(brain_case, tmp_path / "case"))


def open_code(case: Path, rel: str) -> str | None:
    """The refusal code of opening `rel` in a session on the case (None when it opened)."""
    session = open_session(case, preload=False)
    out = session.call("open_case", {"dicom_dir": rel, "size": 64})
    return None if out.ok else out.error["code"]  # type: ignore[index]


def write_raw_volume(path: Path, shape: tuple[int, int, int] = (8, 8, 8)) -> None:
    path.write_bytes(np.full(shape, 7, dtype=np.uint8).tobytes())


def nrrd(path: Path, data_file: str, extra: str = "", encoding: str = "raw") -> None:
    path.write_text(
        f"NRRD0004\ntype: uint8\ndimension: 3\nsizes: 8 8 8\nspacings: 1 1 1\nencoding: {encoding}\n"
        f"data file: {data_file}\n{extra}",
        encoding="latin-1",
    )


def metaimage(path: Path, data_file: str, extra: str = "") -> None:
    path.write_text(
        "ObjectType = Image\nNDims = 3\nDimSize = 8 8 8\nElementSpacing = 1 1 1\nElementType = MET_UCHAR\n"
        f"ElementDataFile = {data_file}\n{extra}",
        encoding="latin-1",
    )


# ----- confinement follows every reference -----
@pytest.mark.parametrize(
    "data_file",
    ["../hidden/mask.nii.gz", "/proc/self/environ", "/etc/passwd", "sub/../../hidden/mask.nii.gz"],
)
def test_detached_nrrd_data_file_is_confined(case: Path, data_file: str) -> None:
    nrrd(case / "images" / "evil.nhdr", data_file, encoding="gzip" if data_file.endswith(".gz") else "raw")
    assert open_code(case, "images/evil.nhdr") == "path_outside_case"


@pytest.mark.parametrize("data_file", ["../hidden/mask.nii.gz", "/proc/self/environ", "/etc/passwd"])
def test_metaimage_element_data_file_is_confined(case: Path, data_file: str) -> None:
    metaimage(case / "images" / "evil.mhd", data_file)
    assert open_code(case, "images/evil.mhd") == "path_outside_case"


def test_list_and_printf_data_files_are_confined(case: Path) -> None:
    """The LIST and pattern forms name several files: one outside is enough to refuse."""
    for n in range(2):
        write_raw_volume(case / "images" / f"s{n:02d}.raw", (1, 8, 8))
    nrrd(case / "images" / "list.nhdr", "LIST 2", extra="s00.raw\n../hidden/truth.json\n")
    assert open_code(case, "images/list.nhdr") == "path_outside_case"
    metaimage(case / "images" / "list.mhd", "LIST 2D", extra="s00.raw\n/proc/self/environ\n")
    assert open_code(case, "images/list.mhd") == "path_outside_case"
    nrrd(case / "images" / "pattern.nhdr", "../hidden/s%02d.raw 0 1 1 2")
    assert open_code(case, "images/pattern.nhdr") == "path_outside_case"
    nrrd(case / "images" / "endless.nhdr", "s%02d.raw 0 100000000 1 2")
    assert open_code(case, "images/endless.nhdr") == "invalid_structure"


def test_confined_references_inside_the_case_still_load(case: Path) -> None:
    """A detached header with its data file beside it (and a valid pattern) opens as before."""
    write_raw_volume(case / "images" / "ok.raw")
    nrrd(case / "images" / "ok.nhdr", "ok.raw")
    assert open_code(case, "images/ok.nhdr") is None
    metaimage(case / "images" / "ok.mhd", "ok.raw")
    assert open_code(case, "images/ok.mhd") is None
    for n in range(8):
        write_raw_volume(case / "images" / f"p{n}.raw", (1, 8, 8))
    nrrd(case / "images" / "pattern.nhdr", "p%d.raw 0 7 1 2")
    assert open_code(case, "images/pattern.nhdr") is None


def test_links_at_any_depth_are_followed(case: Path) -> None:
    """A linked folder on the way into hidden/, a data file that is a link into hidden/, a series member link."""
    (case / "images" / "deep").mkdir()
    os.symlink(case / "hidden", case / "images" / "deep" / "look")
    assert open_code(case, "images/deep/look/mask.nii.gz") == "path_outside_case"
    os.symlink(case / "hidden" / "mask.nii.gz", case / "images" / "data.gz")
    nrrd(case / "images" / "linked.nhdr", "data.gz", encoding="gzip")
    assert open_code(case, "images/linked.nhdr") == "path_outside_case"
    series = case / "images" / "series"
    series.mkdir()
    os.symlink("/proc/self/environ", series / "b.dcm")
    assert open_code(case, "images/series") == "path_outside_case"


def test_fifo_is_refused_not_waited_for(case: Path) -> None:
    os.mkfifo(case / "images" / "pipe.raw")
    nrrd(case / "images" / "pipe.nhdr", "pipe.raw")
    t0 = time.monotonic()
    assert open_code(case, "images/pipe.nhdr") == "path_outside_case"
    assert time.monotonic() - t0 < 5


# ----- parsers that cannot take the server down -----
def _ifd0(b: bytearray) -> tuple[int, int, list[tuple[int, int, int]]]:
    off = struct.unpack("<I", b[4:8])[0]
    n = struct.unpack("<H", b[off : off + 2])[0]
    return off, n, [(off + 2 + 12 * i, *struct.unpack("<HH", b[off + 2 + 12 * i : off + 6 + 12 * i])) for i in range(n)]


def hostile_tiffs(folder: Path) -> dict[str, Path]:
    """A sound tiled JPEG TIFF and three patched copies: 2^20-px tiles, a first IFD that points to itself, and a
    stripped image whose dimensions claim 40000 × 40000 px."""
    import tifffile

    pixels = np.random.default_rng(0).integers(0, 255, (512, 512, 3), dtype=np.uint8)
    tifffile.imwrite(folder / "tiled.tif", pixels, tile=(256, 256), compression="jpeg", photometric="rgb")
    tifffile.imwrite(folder / "strips.tif", pixels, rowsperstrip=64, photometric="rgb")
    out = {}
    for name, source in (("huge_tiles", "tiled"), ("loop", "tiled"), ("dims", "strips")):
        b = bytearray((folder / f"{source}.tif").read_bytes())
        off, n, entries = _ifd0(b)
        for pos, tag, _ in entries:
            if name == "huge_tiles" and tag in (322, 323):
                b[pos : pos + 12] = struct.pack("<HHII", tag, 4, 1, 1 << 20)
            if name == "dims" and tag in (256, 257):
                b[pos : pos + 12] = struct.pack("<HHII", tag, 4, 1, 40000)
        if name == "loop":
            b[off + 2 + 12 * n : off + 6 + 12 * n] = struct.pack("<I", off)
        out[name] = folder / f"{name}.tif"
        out[name].write_bytes(bytes(b))
    return out


@pytest.fixture(scope="module")
def slide_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from copilot.medflow import make_cases

    (path,) = make_cases("breast_wsi", 1, 5, tmp_path_factory.mktemp("slide"), slide_size=(1024, 768), mpp=2.0)
    hostile_tiffs(Path(path) / "images")
    return Path(path)


@pytest.mark.parametrize(("name", "code"), [("huge_tiles", "too_large"), ("loop", "invalid_structure")])
def test_hostile_tiff_refused_while_server_answers(slide_case: Path, tmp_path: Path, name: str, code: str) -> None:
    """load_image of the file over HTTP is refused by name within 10 s; meanwhile and after, ping and GET /state
    answer; the process is still alive (no SIGABRT) and the refusal changed nothing."""
    session = open_session(slide_case, trace_dir=tmp_path / "trace")
    srv = RunningServer(session)
    try:
        before = srv.client.state()
        result: dict[str, object] = {}

        def load() -> None:
            t0 = time.monotonic()
            result["reply"] = RemoteViewer(srv.url, srv.token).call("load_image", {"path": f"images/{name}.tif"})
            result["seconds"] = time.monotonic() - t0

        worker = threading.Thread(target=load)
        worker.start()
        answered = 0
        while worker.is_alive() and answered < 50:
            assert srv.client.call("get_qupath_state", {}).ok  # the slide viewer's ping
            srv.client.state()
            answered += 1
        worker.join(10)
        assert not worker.is_alive()
        reply = result["reply"]
        assert reply.status == 422 and reply.body["error"]["code"] == code  # type: ignore[attr-defined]
        assert float(result["seconds"]) < 10  # type: ignore[arg-type]
        assert srv.client.call("get_qupath_state", {}).ok and srv.client.state() == before
    finally:
        srv.stop()


def test_patched_strip_dimensions_refused_in_one_line(slide_case: Path) -> None:
    """A stripped TIFF whose dimensions were patched to 40000 px: one named refusal, no traceback on stderr."""
    code = (
        "from copilot.runtime import open_session\n"
        f"s = open_session({str(slide_case)!r})\n"
        "o = s.call('load_image', {'path': 'images/dims.tif'})\n"
        "print(o.error['code'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env())
    assert proc.stdout.strip() == "invalid_structure"
    assert "Traceback" not in proc.stderr


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


def gzip_bomb_nifti(path: Path, side: int = 1024, declared: int | None = None) -> None:
    """A NIfTI-1 file whose gzip stream inflates to side³ bytes (1 GiB) from about a megabyte: many identical gzip
    members of 1 MiB of zeros. `declared` (default: side) is the size its header claims."""
    d = declared or side
    header = bytearray(352)
    struct.pack_into("<i", header, 0, 348)
    struct.pack_into("<8h", header, 40, 3, d, d, d, 1, 1, 1, 1)
    struct.pack_into("<hh", header, 70, 2, 8)  # uint8
    struct.pack_into("<8f", header, 76, 1, 1, 1, 1, 1, 1, 1, 1)
    struct.pack_into("<f", header, 108, 352.0)
    header[344:348] = b"n+1\x00"
    member = gzip.compress(bytes(1 << 20), compresslevel=9)
    with path.open("wb") as fh:
        fh.write(gzip.compress(bytes(header)))
        for _ in range(side**3 >> 20):
            fh.write(member)


@pytest.mark.parametrize("declared", [1024, 64])
def test_gzip_bomb_refused_with_bounded_memory(case: Path, declared: int) -> None:
    """1 GiB of zeros in a 1 MB .nii.gz: a header that claims it all is refused `too_large` before inflating; one
    that claims 64³ reads 64³ and no further. Either way the loading process stays under 512 MB resident."""
    gzip_bomb_nifti(case / "images" / "bomb.nii.gz", declared=declared)
    assert (case / "images" / "bomb.nii.gz").stat().st_size < 2 << 20
    code = (
        "from copilot.runtime import open_session\n"
        f"s = open_session({str(case)!r}, preload=False)\n"
        "o = s.call('open_case', {'dicom_dir': 'images/bomb.nii.gz', 'size': 64})\n"
        "print(o.error['code'] if not o.ok else 'opened')\n"
        # VmHWM is this process's own peak: ru_maxrss would keep the parent's peak from before exec
        "print(next(ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM')))\n"
    )
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    outcome, peak_kib = proc.stdout.split()
    assert outcome == ("too_large" if declared == 1024 else "opened"), proc.stderr
    assert int(peak_kib) < 512 * 1024
    assert time.monotonic() - t0 < 30  # the child's own peak is checked above (RUSAGE_CHILDREN counts earlier tests)


def test_compressed_metaimage_bomb_refused(case: Path) -> None:
    """A compressed .mha that declares 2048³ voxels is refused `too_large` without inflating a byte."""
    image = sitk.Image(8, 8, 8, sitk.sitkUInt8)
    sitk.WriteImage(image, str(case / "images" / "small.mha"), True)
    raw = (case / "images" / "small.mha").read_bytes()
    head, sep, body = raw.partition(b"ElementDataFile = LOCAL\n")
    head = head.replace(b"DimSize = 8 8 8", b"DimSize = 2048 2048 2048")
    (case / "images" / "bomb.mha").write_bytes(head + sep + body)
    assert open_code(case, "images/bomb.mha") == "too_large"


# ----- DICOM geometry that is no geometry -----
@pytest.mark.parametrize(
    ("keyword", "raw"),
    [
        ("ImagePositionPatient", "abc\\def\\ghi"),
        ("ImagePositionPatient", "1e308\\1e308\\1e308"),
        ("ImageOrientationPatient", "x\\y\\z\\a\\b\\c"),
    ],
)
def test_dicom_with_unusable_positions_is_a_named_422(case: Path, keyword: str, raw: str) -> None:
    import copy
    import warnings

    import pydicom
    from pydicom.data import get_testdata_file

    base = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    folder = case / "images" / "series"
    folder.mkdir()
    for k in range(3):
        ds = copy.deepcopy(base)
        ds.ImagePositionPatient = [0, 0, 2.5 * k]
        tag = ds[keyword].tag
        ds[tag] = pydicom.dataelem.RawDataElement(tag, "DS", len(raw), raw.encode(), 0, True, True)
        ds.SOPInstanceUID = pydicom.uid.generate_uid()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds.save_as(folder / f"s{k}.dcm")
    session = open_session(case, preload=False)
    for target in ("images/series", "images/series/s1.dcm"):
        out = session.call("open_case", {"dicom_dir": target, "size": 64})
        assert not out.ok and out.status == 422
        assert out.error["code"] in ("invalid_geometry", "missing_geometry")  # type: ignore[index]
        assert "\n" not in out.error["message"] and "GDCM" not in out.error["message"]  # type: ignore[index]


def test_background_failures_are_one_line_each() -> None:
    """Failures nobody waits for (pool threads, finalisers, a server's error log) reach stderr as one line each."""
    code = (
        "import logging, threading\n"
        "from copilot import oneline\n"
        "oneline.install()\n"
        "def boom():\n"
        "    raise RuntimeError('cannot decode a tile\\nsecond line')\n"
        "threads = [threading.Thread(target=boom, name=f'tiles_{i}') for i in range(30)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "try:\n"
        "    1 / 0\n"
        "except ZeroDivisionError:\n"
        "    logging.getLogger('uvicorn.error').exception('Exception in ASGI application')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env())
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr
    assert len(lines) == 31 and all(line.startswith("error: ") for line in lines)


@pytest.mark.parametrize(
    ("child", "code"),
    [
        ("import time; time.sleep(60)", "timeout"),
        ("x = bytearray(8 << 30)", "too_large"),
        ("import os; os.abort()", "invalid_structure"),
    ],
)
def test_slide_probe_names_a_child_that_hangs_bloats_or_dies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child: str, code: str
) -> None:
    """The child-process probe (formats without an in-process structure check) turns a reader that would hang,
    exhaust memory or abort into a named refusal within its limits, and the calling process carries on."""
    from copilot.engine.slide import probe

    header = "\n".join(probe._CHILD.strip().splitlines()[:5])  # the limits the real probe sets
    monkeypatch.setattr(probe, "_CHILD", header + "\n" + child + "\n")
    monkeypatch.setattr(probe, "WALL_S", 3.0)
    slide = tmp_path / "slide.mrxs"
    slide.write_bytes(b"not a slide")
    t0 = time.monotonic()
    with pytest.raises(probe.ProbeError) as refused:
        probe._probe.__wrapped__(str(slide), 11, 0)
    assert refused.value.code == code and time.monotonic() - t0 < 10


def test_unknown_format_is_refused_by_the_reader_after_the_probe(slide_case: Path) -> None:
    (slide_case / "images" / "garbage.mrxs").write_bytes(b"\x00" * 4096)
    session = open_session(slide_case)
    out = session.call("load_image", {"path": "images/garbage.mrxs"})
    assert not out.ok and out.status == 422 and out.error["code"] == "load_failed"  # type: ignore[index]


@pytest.mark.gui
@pytest.mark.heavy
def test_app_exits_2_on_an_unreadable_study(case: Path, tmp_path: Path) -> None:
    """`gui --screenshot` on a study that cannot be read: one line on stderr and exit code 2 (bad input)."""
    pytest.importorskip("PySide6")
    bad = tmp_path / "bad.nii.gz"
    bad.write_bytes(next((case / "images").glob("*.nii.gz")).read_bytes()[:5000])
    env = {**_env(), "QT_QPA_PLATFORM": "offscreen"}
    cmd = [sys.executable, "-m", "copilot.cli", "gui", str(bad), "--screenshot", str(tmp_path / "shot.png")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "truncated" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_compressed_size_beyond_the_file_is_refused(case: Path) -> None:
    """A compressed .mha that declares 10^11 bytes of compressed data in a 400-byte file: refused before ITK
    allocates for it."""
    sitk.WriteImage(sitk.Image(8, 8, 8, sitk.sitkUInt8), str(case / "images" / "c.mha"), True)
    raw = (case / "images" / "c.mha").read_bytes()
    start = raw.index(b"CompressedDataSize = ")
    end = raw.index(b"\n", start)
    (case / "images" / "claims.mha").write_bytes(raw[:start] + b"CompressedDataSize = 100000000000" + raw[end:])
    assert open_code(case, "images/claims.mha") == "truncated_image"


def test_state_answers_while_a_call_holds_the_session(slide_case: Path) -> None:
    """GET /state during a 3 s call answers within about a second, with the state the last completed call left."""
    session = open_session(slide_case)
    srv = RunningServer(session)
    try:
        before = srv.client.state()
        worker = threading.Thread(target=lambda: RemoteViewer(srv.url, srv.token).call("sleep", {"seconds": 3}))
        worker.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        during = srv.client.state()
        waited = time.monotonic() - t0
        worker.join(10)
        assert during == before and waited < 2
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("files", "slide"),
    [
        (
            {"evil.mrxs": "", "evil/Slidedat.ini": "[DATAFILE]\nFILE_COUNT = 1\nFILE_0 = ../../hidden/truth.json\n"},
            "evil.mrxs",
        ),
        ({"evil.vms": "[Virtual Microscope Specimen]\nImageFile = ../hidden/truth.json\n"}, "evil.vms"),
        ({"linked.mrxs": ""}, "linked.mrxs"),
    ],
)
def test_multi_file_slide_siblings_are_confined(slide_case: Path, tmp_path: Path, files: dict, slide: str) -> None:
    """MIRAX data files listed in Slidedat.ini, VMS image files, and a MIRAX data folder linked elsewhere."""
    images = tmp_path / "case" / "images"
    case = Path(shutil.copytree(slide_case, tmp_path / "case", symlinks=True))
    for rel, text in files.items():
        (images / rel).parent.mkdir(parents=True, exist_ok=True)
        (images / rel).write_text(text, encoding="utf-8")
    if slide == "linked.mrxs":
        os.symlink(case / "hidden", images / "linked")
    session = open_session(case)
    out = session.call("load_image", {"path": f"images/{slide}"})
    assert not out.ok and out.error["code"] == "path_outside_case"  # type: ignore[index]
