"""Slides written tile by tile: the same file as the whole image written at once, seamless tile-local texture,
bounded memory at a size whose whole image would not fit the bound, and progress on `cases make`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile
from PIL import Image

from copilot.cases import canvas
from copilot.cases.slides import write_pyramid, write_pyramid_tiles
from copilot.cases.wsi import make_breast_case, make_lymph_case
from copilot.cli import main

ROOT = Path(__file__).resolve().parent.parent


def whole_image_pyramid(path: Path, image: np.ndarray, mpp: float, downsamples: tuple[int, ...] = (1, 4, 16)) -> None:
    """The whole-image way: every level reduced from the full image in memory, each written in one call."""
    pil = Image.fromarray(image)
    with tifffile.TiffWriter(path, bigtiff=True) as tw:
        for n, d in enumerate(downsamples):
            res = 1e4 / (mpp * d)
            tw.write(
                image if d == 1 else np.asarray(pil.reduce(d)),
                tile=(256, 256),
                compression="jpeg",
                compressionargs={"level": 90},
                photometric="rgb",
                resolution=(res, res),
                resolutionunit="CENTIMETER",
                subfiletype=0 if n == 0 else 1,
                metadata=None,
            )


def levels(path: Path) -> list[np.ndarray]:
    with tifffile.TiffFile(path) as tif:
        return [page.asarray() for page in tif.pages]


@pytest.mark.parametrize("shape", [(768, 1024), (700, 1000), (300, 257), (17, 33)])
def test_tile_by_tile_writer_equals_the_whole_image_writer(tmp_path: Path, shape: tuple[int, int]) -> None:
    image = np.random.default_rng(shape[0]).integers(0, 256, (*shape, 3), dtype=np.uint8)
    whole_image_pyramid(tmp_path / "whole.tif", image, 0.5)
    asked: list[tuple[int, int, int, int]] = []

    def source(y: int, x: int, h: int, w: int) -> np.ndarray:
        asked.append((y, x, h, w))
        return image[y : y + h, x : x + w]

    fractions: list[float] = []
    write_pyramid_tiles(tmp_path / "tiles.tif", shape, source, 0.5, progress=fractions.append)
    for a, b in zip(levels(tmp_path / "whole.tif"), levels(tmp_path / "tiles.tif"), strict=True):
        assert a.shape == b.shape and np.array_equal(a, b)
    assert (tmp_path / "whole.tif").read_bytes() == (tmp_path / "tiles.tif").read_bytes()
    assert all(h <= 256 and w <= 256 for _, _, h, w in asked) and len(asked) == len(set(asked))
    assert fractions[-1] == 1.0 and fractions == sorted(fractions)
    write_pyramid(tmp_path / "array.tif", image, 0.5)
    assert (tmp_path / "array.tif").read_bytes() == (tmp_path / "whole.tif").read_bytes()


def test_writer_rejects_wrong_tiles_and_downsamples(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected"):
        write_pyramid_tiles(tmp_path / "a.tif", (300, 300), lambda y, x, h, w: np.zeros((1, 1, 3), np.uint8), 0.5)
    with pytest.raises(ValueError, match="downsamples"):
        write_pyramid_tiles(
            tmp_path / "b.tif", (300, 300), lambda y, x, h, w: np.zeros((h, w, 3), np.uint8), 0.5, (1, 3)
        )


def test_texture_windows_agree_where_they_overlap() -> None:
    big = canvas.nuclei(7, 1, 100, 150, 400, 300, 40.0, 2.6)
    small = canvas.nuclei(7, 1, 300, 200, 128, 128, 40.0, 2.6)
    assert big.max() > 0.5 and np.array_equal(big[200:328, 50:178], small)
    assert np.array_equal(canvas.noise(7, 2, 0, 0, 512, 512)[260:300, 250:270], canvas.noise(7, 2, 260, 250, 40, 20))


def test_slide_cases_are_deterministic_and_truthful(tmp_path: Path) -> None:
    a = make_breast_case(tmp_path / "a", "c", 5, size=(1024, 768), mpp=2.0, label="DCIS")
    b = make_breast_case(tmp_path / "b", "c", 5, size=(1024, 768), mpp=2.0, label="DCIS")
    assert (a / "images" / "slide.tif").read_bytes() == (b / "images" / "slide.tif").read_bytes()
    lymph = make_lymph_case(tmp_path, "l", 3, size=(1024, 768), mpp=4.0, largest="macro")
    classes = (lymph / "hidden" / "annotations.xml").read_text(encoding="utf-8")
    assert 'PartOfGroup="_0"' in classes and 'PartOfGroup="_2"' in classes  # a metastasis and a fold beside it
    level0 = levels(a / "images" / "slide.tif")[0]
    assert level0.shape == (768, 1024, 3)
    necrosis = np.all(np.abs(level0.astype(int) - (236, 170, 200)) < 6, axis=-1)  # DCIS comedo necrosis
    assert necrosis.sum() > 50


BOUNDED = r"""
import sys
import numpy as np
from pathlib import Path
from copilot.cases.slides import write_pyramid_tiles
tile = np.random.default_rng(0).integers(0, 256, (256, 256, 3), dtype=np.uint8) // 16 * 16
write_pyramid_tiles(Path(sys.argv[1]), (16000, 20000), lambda y, x, h, w: tile[:h, :w], 0.5, quality=50)
print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")))
"""


def test_a_large_slide_is_written_in_bounded_memory(tmp_path: Path) -> None:
    """20000×16000 px (915 MB of RGB) written under 300 MB of peak resident memory, in a fresh process."""
    out = tmp_path / "big.tif"
    proc = subprocess.run(
        [sys.executable, "-c", BOUNDED, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=True,
    )
    assert int(proc.stdout.split()[-1]) < 300 * 1024
    with tifffile.TiffFile(out) as tif:
        assert [p.shape for p in tif.pages] == [(16000, 20000, 3), (4000, 5000, 3), (1000, 1250, 3)]
        assert np.array_equal(tif.pages[2].asarray()[:8, :8], tif.pages[2].asarray()[64:72, 64:72])


def test_cases_make_reports_progress_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["cases", "make", "--module", "lymph_node_wsi", "--slide-size", "1024x768", "--mpp", "4", "--out"]
    assert main([*args, str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "lymph_node_wsi_000_0000 slide: 100%" in err and "case 1/1 lymph_node_wsi_000_0000: 0%" in err
