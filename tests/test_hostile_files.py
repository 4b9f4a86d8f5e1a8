"""Hostile files: references that leave the case, images built to exhaust memory or loop a parser, and broken
DICOM geometry are refused by name, quickly, and the server keeps answering meanwhile."""

from __future__ import annotations

import gzip
import os
import resource
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
