"""TIFF directory graphs: a directory reached by several paths (a SubIFD chain tifffile also links, a reduced
image shared by two pages) is no loop and a SubIFD pyramid opens with tifffile's levels; a directory that
links back to itself, through the next-page chain or a SubIFD, is still refused."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import tifffile

from copilot.engine.slide.checks import SlideFileError, check_tiff_structure
from copilot.engine.slide.source import SlideSource
from tests.test_hostile_files import hostile_tiffs


def _pyramid(path: Path, pages: int = 1) -> np.ndarray:
    """`pages` pages of a 640 × 512 RGB image, each with two SubIFD levels (1/2 and 1/4), tiles of 128 px."""
    img = np.random.default_rng(3).integers(0, 255, (512, 640, 3), dtype=np.uint8)
    with tifffile.TiffWriter(path) as tw:
        for _ in range(pages):
            tw.write(img, subifds=2, tile=(128, 128), photometric="rgb")
            for step in (2, 4):
                tw.write(img[::step, ::step], subfiletype=1, tile=(128, 128), photometric="rgb")
    return img


def _subifd_value_at(path: Path, page: int) -> tuple[int, list[int]]:
    """File position of a page's SubIFDs value (inline or not) and the offsets it lists."""
    with tifffile.TiffFile(path) as tf:
        tag = tf.pages[page].tags["SubIFDs"]  # type: ignore[union-attr]
        return int(tag.valueoffset), [int(v) for v in tag.value]


def test_subifd_pyramid_opens_with_tifffiles_levels(tmp_path: Path) -> None:
    path = tmp_path / "pyramid.tif"
    img = _pyramid(path)
    assert check_tiff_structure(path) == 3  # level 0 and its two SubIFDs, each walked once
    with tifffile.TiffFile(path) as tf:
        levels = [level.asarray() for level in tf.series[0].levels]
    assert [lv.shape for lv in levels] == [(512, 640, 3), (256, 320, 3), (128, 160, 3)]
    slide = SlideSource(path)
    try:
        assert slide.info.level_dimensions == ((640, 512), (320, 256), (160, 128))
        assert slide.info.level_downsamples == (1.0, 2.0, 4.0)
        for n, expected in enumerate(levels):
            w, h = slide.info.level_dimensions[n]
            rows = [np.hstack([slide.read_tile(n, tx, ty) for tx in range(-(-w // slide.tile))])
                    for ty in range(-(-h // slide.tile))]  # fmt: skip
            assert np.array_equal(np.vstack(rows), expected), n
        assert np.array_equal(levels[0], img)
    finally:
        slide.close()


def test_a_directory_shared_by_two_pages_is_no_loop(tmp_path: Path) -> None:
    path = tmp_path / "shared.tif"
    _pyramid(path, pages=2)
    assert check_tiff_structure(path) == 6
    first_pos, first_subs = _subifd_value_at(path, 0)
    second_pos, _ = _subifd_value_at(path, 1)
    data = bytearray(path.read_bytes())
    data[second_pos : second_pos + 8] = data[first_pos : first_pos + 8]  # page 1 lists page 0's SubIFDs
    path.write_bytes(bytes(data))
    assert _subifd_value_at(path, 1)[1] == first_subs
    assert check_tiff_structure(path) == 4  # two pages, two shared reduced images


def test_true_cycles_are_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "cycle.tif"
    _pyramid(path)
    _, subs = _subifd_value_at(path, 0)
    with tifffile.TiffFile(path) as tf:
        first = int(tf.pages[0].offset)
    data = bytearray(path.read_bytes())
    n = struct.unpack("<H", data[subs[-1] : subs[-1] + 2])[0]
    next_at = subs[-1] + 2 + 12 * n
    data[next_at : next_at + 4] = struct.pack("<I", first)  # the last SubIFD links back to level 0
    path.write_bytes(bytes(data))
    with pytest.raises(SlideFileError, match="loops") as err:
        check_tiff_structure(path)
    assert err.value.code == "invalid_structure"
    hostile = hostile_tiffs(tmp_path)  # the last round's self-linked first directory
    with pytest.raises(SlideFileError, match="loops"):
        check_tiff_structure(hostile["loop"])
    with pytest.raises(SlideFileError) as big:
        check_tiff_structure(hostile["huge_tiles"])
    assert big.value.code == "too_large"
