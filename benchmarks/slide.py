"""Slide viewport render time (cold and warm tiles) against OpenSlide `read_region` at level 0 + downscale,
and memory while panning a 100k × 80k px slide.

Run: `.venv/bin/python benchmarks/slide.py` (`--memory` for the panning profile only, printed as JSON).
The slide is generated: a pyramidal JPEG TIFF whose tiles are drawn from a few pre-encoded H&E-like
tiles, so a gigapixel file is written in about a second.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from pathlib import Path

import imagecodecs
import numpy as np
import openslide
import psutil
import tifffile
from PIL import Image

from copilot.cases.slides import he_image, nuclei_map, smooth_field
from copilot.engine.render import encode_png
from copilot.engine.slide import TileCache
from copilot.engine.slide_viewer import EmbeddedSlideViewer

TILE = 256


def write_big_slide(
    path: Path, width: int = 100_000, height: int = 80_000, mpp: float = 0.25, textured: int = 12
) -> Path:
    """A width × height slide with levels 1, 4, 16, 64 made of 16 pre-encoded tile variants, `textured` of
    them H&E-like (the others plain glass, which keeps the file small)."""
    rng = np.random.default_rng(0)
    variants = []
    for n in range(16):
        tissue = np.full((TILE, TILE), 0.0 if n >= textured else 1.0, dtype=np.float32)
        if n < textured:
            tissue = (smooth_field((TILE, TILE), rng, 64) > 0.3).astype(np.float32)
        variants.append(imagecodecs.jpeg8_encode(he_image(tissue, nuclei_map((TILE, TILE), rng, 8, 4), rng), level=85))

    def tiles(rows: int, cols: int):
        for y in range(rows):
            for x in range(cols):
                yield variants[(x * 7 + y * 13 + (x * y) % 5) % 16]

    with tifffile.TiffWriter(path, bigtiff=True) as tw:
        for n, d in enumerate((1, 4, 16, 64)):
            h, w = height // d, width // d
            res = 1e4 / (mpp * d)
            tw.write(
                tiles(-(-h // TILE), -(-w // TILE)),
                shape=(h, w, 3),
                dtype=np.uint8,
                tile=(TILE, TILE),
                compression="jpeg",
                photometric="rgb",
                resolution=(res, res),
                resolutionunit="CENTIMETER",
                subfiletype=0 if n == 0 else 1,
                metadata=None,
            )
    return path


def stats(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples), samples[min(len(samples) - 1, int(0.95 * len(samples)))]


def jpeg(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def bench_render(path: Path, repeats: int) -> None:
    rng = np.random.default_rng(1)
    slide = openslide.OpenSlide(str(path))
    for d in (1.0, 2.0, 4.0, 16.0):
        centres = rng.uniform([20_000, 20_000], [80_000, 60_000], size=(repeats, 2))
        cold, warm, alt, png_ms, jpg_ms = [], [], [], [], []
        for cx, cy in centres:
            viewer = EmbeddedSlideViewer(cache=TileCache())
            viewer.open(path)
            viewer.set_downsample(d)
            viewer.set_centre(cx, cy)
            t0 = time.perf_counter()
            image = viewer.render()
            cold.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            image = viewer.render()
            warm.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            encode_png(image)
            png_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            jpeg(image)
            jpg_ms.append((time.perf_counter() - t0) * 1000)
            if d <= 4:
                x0, y0 = int(cx - 512 * d), int(cy - 384 * d)
                t0 = time.perf_counter()
                region = slide.read_region((x0, y0), 0, (int(1024 * d), int(768 * d))).convert("RGB")
                jpeg(region.resize((1024, 768), Image.Resampling.BILINEAR))
                alt.append((time.perf_counter() - t0) * 1000)
        (cm, cp), (wm, wp) = stats(cold), stats(warm)
        line = f"downsample {d:5.1f}: render cold {cm:6.1f} / {cp:6.1f} ms, warm {wm:5.1f} / {wp:5.1f} ms"
        line += f"; encode PNG {stats(png_ms)[0]:5.1f} ms, JPEG {stats(jpg_ms)[0]:5.1f} ms"
        if alt:
            am = stats(alt)[0]
            line += (
                f"; read_region(level 0)+resize+JPEG {am:7.1f} ms → ratio {am / (cm + stats(jpg_ms)[0]):5.1f}× (cold)"
            )
        print(line)


def memory_profile(path: Path, steps: int, cache_mb: int) -> dict[str, float]:
    """Pan a serpentine path over the slide at downsamples 1 and 4; RSS in MB along the way."""
    proc = psutil.Process()
    viewer = EmbeddedSlideViewer(cache=TileCache(cache_mb * 1024 * 1024))
    viewer.open(path)
    w, h = viewer.slide.info.dimensions
    rss = []
    for n in range(steps):
        d = 1.0 if (n // 25) % 2 == 0 else 4.0
        row, col = divmod(n, 40)
        x = (col if row % 2 == 0 else 39 - col) / 39 * (w - 4000) + 2000
        y = 2000 + (row * 3000) % (h - 4000)
        viewer.set_downsample(d)
        viewer.set_centre(x, y)
        encode_png(viewer.render())
        rss.append(proc.memory_info().rss / 2**20)
    warm = rss[min(20, len(rss) - 1)]
    return {
        "steps": steps,
        "cache_mb": cache_mb,
        "rss_after_warmup_mb": round(warm, 1),
        "rss_peak_mb": round(max(rss), 1),
        "rss_end_mb": round(rss[-1], 1),
        "growth_after_warmup_mb": round(max(rss) - warm, 1),
        "cache_bytes_mb": round(viewer.cache.nbytes / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--memory", action="store_true", help="only the panning memory profile, as JSON")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--cache-mb", type=int, default=64)
    parser.add_argument("--textured", type=int, default=12, help="H&E-like tile variants out of 16")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = write_big_slide(Path(tmp) / "big.tif", textured=ns.textured)
        made = time.perf_counter() - t0
        if ns.memory:
            print(json.dumps(memory_profile(path, ns.steps, ns.cache_mb)))
            return
        print(f"100000 x 80000 px slide written in {made:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
        bench_render(path, ns.repeats)
        print(json.dumps(memory_profile(path, ns.steps, ns.cache_mb)))


if __name__ == "__main__":
    main()
