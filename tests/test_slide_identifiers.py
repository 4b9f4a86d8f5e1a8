"""A slide is patient data: the MRN, barcode and Filename its scanner wrote (and the case number they share with the
file's name) feed the identifier set with their parts, the file's name is neither drawn nor sent, a label page
stored as a tiled page never reaches the overview, and the banner says what the scanner recorded. A `chat` on such a
slide sends none of its identifiers and no label pixel."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
from PIL import Image

from copilot.cli import main
from copilot.engine.slide.identity import identifying_properties, names_an_identifier, tissue_levels, value_parts
from copilot.engine.slide.source import SlideSource
from copilot.panel import ocr
from copilot.panel.banner import SLIDE_NAMES, study_banner
from copilot.panel.studies import study_for
from tests.fake_openai import FakeOpenAI
from tests.test_study_copilot import drawn_text  # noqa: F401  (the fixture)

DESCRIPTION = "Scanner QX|MRN = 7734921|Barcode = S24-01234-A1-HE|Filename = S24-01234|Date = 09/17/24"
FORBIDDEN = ["7734921", "S24-01234", "S24 01234", "S2401234", "A1-HE"]
LABEL_RGB = (0, 255, 0)  # the label page is pure green: never in an image sent


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wsi") / "S24-01234.tiff"
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:768, 0:1024]
    pink = np.stack([235 - 40 * ((x // 64 + y // 64) % 2), 180 + 0 * x, 215 + 0 * x], axis=-1)
    image = np.clip(pink + rng.normal(0, 6, pink.shape), 0, 255).astype(np.uint8)
    label = np.zeros((128, 128, 3), dtype=np.uint8)
    label[:] = LABEL_RGB
    with tifffile.TiffWriter(path) as tw:
        for n, level in enumerate((image, np.asarray(Image.fromarray(image).reduce(4)), label)):
            tags: dict[str, Any] = {"description": DESCRIPTION} if n == 0 else {}
            tw.write(level, tile=(256, 256), compression="jpeg", photometric="rgb", resolution=(5000, 5000),
                     resolutionunit="CENTIMETER", subfiletype=0 if n == 0 else 1, metadata=None, **tags)  # fmt: skip
    return path


def test_identifying_properties_their_parts_and_tissue_levels() -> None:
    found = identifying_properties({"tiff.ImageDescription": DESCRIPTION, "aperio.AppMag": "20",
                                    "mirax.GENERAL.SLIDE_ID": "M-991", "dicom.PatientID": "PX-4471"})  # fmt: skip
    assert set(found.values()) == {"7734921", "S24-01234-A1-HE", "S24-01234", "09/17/24", "M-991", "PX-4471"}
    assert {"S24-01234", "S24-01234-A1", "01234"} <= value_parts("S24-01234-A1-HE")
    assert names_an_identifier("S24-01234", {"tiff.ImageDescription": DESCRIPTION})
    assert not names_an_identifier("he_section", {"tiff.ImageDescription": DESCRIPTION})
    ome = '<OME><Image ID="Image:0" Name="CASE-8812 block 2"/><Experimenter UserName="jdoe"/></OME>'
    assert set(identifying_properties({"tiff.ImageDescription": ome}).values()) == {"CASE-8812 block 2", "jdoe"}
    assert tissue_levels(((1024, 768), (256, 192), (128, 128))) == 2
    assert tissue_levels(((1024, 768), (512, 384), (256, 192))) == 3


def _green(image: Image.Image) -> int:
    a = np.asarray(image.convert("RGB")).astype(int)
    return int(((a[..., 1] > 200) & (a[..., 0] < 60) & (a[..., 2] < 60)).sum())


def test_the_slide_is_shown_as_slide_without_its_label_page(slide: Path) -> None:
    source = SlideSource(slide)
    try:
        assert source.info.name == "slide" and len(source.info.level_dimensions) == 2  # OpenSlide reads three
        assert _green(source.thumbnail) == 0 and source.serving_level(16.0)[0] == 1
        assert _green(Image.fromarray(source.read_tile(1, 0, 0))) == 0
    finally:
        source.close()
    banner = study_banner(study_for(str(slide)))
    assert banner.patient.startswith(SLIDE_NAMES) and "7734921" in banner.patient and "S24-01234" in banner.line


def test_chat_on_the_slide_sends_no_identifier_and_no_label_pixel(
    slide: Path, tmp_path: Path, drawn_text: list[str], monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:  # fmt: skip
    fake = FakeOpenAI([{"content": "Benign-looking tissue."}])
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    try:
        rc = main(["chat", str(slide), "--base-url", fake.base_url, "--trace-dir", str(tmp_path / "trace"),
                   "--ask", "Is case S24 01234 (MRN 7734921, slide S24-01234-A1-HE) malignant?"])  # fmt: skip
    finally:
        fake.stop()
    assert rc == 0 and fake.bodies
    images = 0
    for body in fake.bodies:
        text = body.decode("utf-8")
        assert [f for f in FORBIDDEN if f.lower() in text.lower()] == []
        for url in _image_urls(json.loads(text)):
            images += 1
            data = base64.b64decode(url.split(",", 1)[1])
            assert _green(Image.open(io.BytesIO(data))) == 0
            if ocr.available():  # what is written in the image, read back: no identifier of the slide
                read = " ".join(w.text for w in ocr.read_words(data)).lower()
                assert [f for f in ("7734921", "s24", "01234") if f in read] == [], read
    assert images >= 1
    assert [line for line in drawn_text if any(f.lower() in line.lower() for f in FORBIDDEN)] == []


def _image_urls(value: Any) -> list[str]:
    if isinstance(value, dict):
        if value.get("type") == "image_url":
            return [value["image_url"]["url"]]
        return [u for v in value.values() for u in _image_urls(v)]
    if isinstance(value, list):
        return [u for v in value for u in _image_urls(v)]
    return []
