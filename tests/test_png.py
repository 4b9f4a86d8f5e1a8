"""The fast PNG writer decodes to the same pixels as the image it was given, and traces replay with the
encoder they name (older traces, which name none, with the writer they were recorded with)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from copilot.cases.pack import load_case
from copilot.engine.png import LEGACY_PNG_ENCODER, PNG_ENCODER, png_encoder
from copilot.engine.volume.render import encode_png
from copilot.replay import replay
from copilot.runtime import session_header
from copilot.trace.recorder import TRACE_FILE, TraceRecorder
from tests.conftest import older_trace


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA"])
@pytest.mark.parametrize("size", [(1, 1), (1, 7), (7, 1), (513, 257)])
def test_decoded_pixels_equal_the_image(mode: str, size: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(size))
    channels = {"L": (), "RGB": (3,), "RGBA": (4,)}[mode]
    pixels = rng.integers(0, 256, (size[1], size[0], *channels), dtype=np.uint8)
    pixels[: size[1] // 2] = 255  # runs as well as noise (wrap-around of the Up filter: 0 − 255)
    image = Image.fromarray(pixels, mode)
    data = encode_png(image)
    decoded = Image.open(io.BytesIO(data))
    decoded.load()
    assert decoded.mode == mode and decoded.size == size
    assert np.array_equal(np.asarray(decoded), pixels)
    assert data == encode_png(image)  # deterministic: a trace's hashes are reproducible


def test_rendered_view_smaller_than_pillow_and_lossless(session) -> None:  # type: ignore[no-untyped-def]
    out = session.call("observe", {"view": "red", "size": 512})
    assert out.ok
    image = Image.open(io.BytesIO(out.images[0].data))
    again = png_encoder(LEGACY_PNG_ENCODER)(image)
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(again))), np.asarray(image))


def test_a_trace_names_its_encoder_and_old_traces_replay(brain_case: Path, tmp_path: Path) -> None:
    assert session_header(load_case(brain_case), "A")["png_encoder"] == PNG_ENCODER
    calls = [("set_slice_offset", {"view": "red", "offset": 10.0, "size": 128})]
    older_trace(brain_case, tmp_path / "old", "png_encoder", calls, png_encoder=LEGACY_PNG_ENCODER)
    report = replay(tmp_path / "old")
    assert report.ok, report.summary()

    lines = (tmp_path / "old" / TRACE_FILE).read_text().splitlines()
    head = json.loads(lines[0])
    head["png_encoder"] = "future-encoder"
    bad = TraceRecorder(tmp_path / "bad", {k: v for k, v in head.items() if k not in ("seq", "prev", "hash", "type")})
    bad.close()
    refused = replay(tmp_path / "bad")
    assert not refused.ok and "unknown PNG encoder 'future-encoder'" in refused.summary()
